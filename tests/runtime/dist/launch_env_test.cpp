// Threads per rank and the launcher's rank from the environment: SLURM_CPUS_PER_TASK inside an srun
// task, the affinity mask when the launcher bound the rank to fewer CPUs than the host has, else the
// host's CPUs shared by its ranks; runtime.cpu_threads wins over all.
#include "runtime/dist/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace conveyor {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* k) -> const char* {
    auto it = vars.find(k);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(LaunchEnv, CpuThreadsFollowWhatTheLauncherGave) {
  const EnvLookup none = env_of({});
  // mpirun without binding: 2 ranks on a 2-core host get one thread each, not two.
  EXPECT_EQ(choose_cpu_threads(0, 2, 2, 2, none).count, 1);
  EXPECT_EQ(choose_cpu_threads(0, 64, 64, 8, none).count, 8);
  EXPECT_EQ(choose_cpu_threads(0, 4, 4, 8, none).count, 1);  // never 0
  // Bound by mpirun --bind-to core or a Slurm cgroup: the mask is the answer.
  EXPECT_EQ(choose_cpu_threads(0, 3, 64, 8, none).count, 3);
  // srun --cpus-per-task=6, but only inside the task (SLURM_PROCID set).
  EXPECT_EQ(choose_cpu_threads(0, 64, 64, 8, env_of({{"SLURM_CPUS_PER_TASK", "6"}, {"SLURM_PROCID", "1"}})).count, 6);
  EXPECT_EQ(choose_cpu_threads(0, 64, 64, 8, env_of({{"SLURM_CPUS_PER_TASK", "6"}})).count, 8);
  const CpuThreads set = choose_cpu_threads(5, 3, 64, 8, env_of({{"SLURM_CPUS_PER_TASK", "6"}, {"SLURM_PROCID", "0"}}));
  EXPECT_EQ(set.count, 5);
  EXPECT_EQ(set.source, "--set runtime.cpu_threads");
}

TEST(LaunchEnv, RankAndSizeFromAnyLauncher) {
  EXPECT_EQ(launcher_rank(env_of({})), -1);
  EXPECT_EQ(launcher_world_size(env_of({})), 1);
  EXPECT_EQ(launcher_rank(env_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}})), 3);
  EXPECT_EQ(launcher_world_size(env_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}})), 4);
  EXPECT_EQ(launcher_rank(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}})), 5);
  EXPECT_EQ(launcher_world_size(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}})), 8);
  EXPECT_EQ(launcher_world_size(env_of({{"SLURM_NTASKS", "8"}})), 1);  // the batch script, not a task
}

}  // namespace
}  // namespace conveyor
