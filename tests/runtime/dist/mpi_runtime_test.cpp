// Broken-launch detection: srun without PMIx (N singletons) and a foreign mpirun are refused.
#include "runtime/dist/mpi_runtime.h"

#include <gtest/gtest.h>

#include <map>

namespace conveyor {
namespace {

std::function<const char*(const char*)> env(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* k) -> const char* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST(CheckLaunch, SrunSingletonsAreRefused) {
  std::string msg = check_launch(1, env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}}));
  EXPECT_NE(msg.find("srun started 8 tasks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--mpi=pmix"), std::string::npos) << msg;
}

TEST(CheckLaunch, StepTaskCountWins) {
  EXPECT_EQ(check_launch(4, env({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NTASKS", "16"}})),
            "");
}

TEST(CheckLaunch, SlurmVariablesOutsideATaskAreIgnored) {
  // An sbatch script's own shell has SLURM_NTASKS but no SLURM_PROCID: a single process is fine.
  EXPECT_EQ(check_launch(1, env({{"SLURM_NTASKS", "8"}})), "");
}

TEST(CheckLaunch, OpenMpiSizeMismatch) {
  std::string msg = check_launch(1, env({{"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_NE(msg.find("mpirun"), std::string::npos) << msg;
  EXPECT_EQ(check_launch(2, env({{"OMPI_COMM_WORLD_SIZE", "2"}})), "");
  EXPECT_EQ(check_launch(1, env({})), "");
}

}  // namespace
}  // namespace conveyor
