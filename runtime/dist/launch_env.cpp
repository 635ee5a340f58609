// Launcher environment (see launch_env.h). Without a thread count of its own, OpenMP takes every core
// of the host in every rank, so ranks sharing a host oversubscribe it many times over.
#include "runtime/dist/launch_env.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace conveyor {
namespace {

int positive_int(const char* v) {
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 && n < (1 << 30) ? static_cast<int>(n) : -1;
}

const EnvLookup& real_env() {
  static const EnvLookup env = [](const char* k) { return static_cast<const char*>(std::getenv(k)); };
  return env;
}

// The first variable set to a number; SLURM_* only inside an srun task (SLURM_PROCID set), since an
// sbatch script's own environment describes the allocation, not this MPI world.
int first_of(const EnvLookup& getenv, std::initializer_list<const char*> vars) {
  for (const char* var : vars) {
    if (std::string(var).rfind("SLURM_", 0) == 0 && !getenv("SLURM_PROCID")) continue;
    const int v = positive_int(getenv(var));
    if (v >= 0) return v;
  }
  return -1;
}

}  // namespace

int launcher_rank(const EnvLookup& getenv) {
  return first_of(getenv, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
}
int launcher_rank() { return launcher_rank(real_env()); }

int launcher_world_size(const EnvLookup& getenv) {
  return std::max(1, first_of(getenv, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
}
int launcher_world_size() { return launcher_world_size(real_env()); }

CpuThreads choose_cpu_threads(int requested, int affinity_cpus, int host_cpus, int local_ranks,
                              const EnvLookup& getenv) {
  if (requested > 0) return {requested, "--set runtime.cpu_threads"};
  const int slurm = first_of(getenv, {"SLURM_CPUS_PER_TASK"});
  if (slurm > 0) return {slurm, "SLURM_CPUS_PER_TASK"};
  if (affinity_cpus > 0 && affinity_cpus < host_cpus) return {affinity_cpus, "the CPUs this rank is bound to"};
  const int ranks = std::max(1, local_ranks);
  return {std::max(1, std::max(host_cpus, 1) / ranks),
          std::to_string(std::max(host_cpus, 1)) + " CPUs shared by " + std::to_string(ranks) + " rank(s) on this host"};
}

CpuThreads choose_cpu_threads(int requested, int local_ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const int host = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return choose_cpu_threads(requested, affinity, host, local_ranks, real_env());
}

}  // namespace conveyor
