// What the launcher (mpirun, srun) told this process through its environment, readable before MPI is
// up: the rank, the ranks of the job and of this host, and the CPUs this rank may use. The pure
// functions take the values so tests can give any launcher's; the others read the real environment.
#pragma once

#include <functional>
#include <string>

namespace conveyor {

using EnvLookup = std::function<const char*(const char*)>;

// OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, or SLURM_PROCID inside an srun task; -1 when none is set.
int launcher_rank(const EnvLookup& getenv);
int launcher_rank();
// The job's rank count from the same sources (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS); 1 when none.
int launcher_world_size(const EnvLookup& getenv);
int launcher_world_size();

// How many threads a rank uses on the CPU backend, and why (for the start-up line).
struct CpuThreads {
  int count = 1;
  std::string source;  // "--set runtime.cpu_threads", "SLURM_CPUS_PER_TASK", "CPU affinity", ...
};
// The CPUs a rank was given: SLURM_CPUS_PER_TASK inside an srun task; else the affinity mask when the
// launcher bound it to fewer CPUs than the host has; else the host's CPUs shared by its local ranks.
// `requested` > 0 (runtime.cpu_threads) wins over all of them.
CpuThreads choose_cpu_threads(int requested, int affinity_cpus, int host_cpus, int local_ranks,
                              const EnvLookup& getenv);
// The same with this process's affinity mask (sched_getaffinity) and the host's online CPUs.
CpuThreads choose_cpu_threads(int requested, int local_ranks);

}  // namespace conveyor
