// MPI bootstrap (see mpi_runtime.h).
#include "runtime/dist/mpi_runtime.h"

#include <cstdlib>
#include <exception>

#include "runtime/core/error.h"

namespace conveyor {

std::string check_launch(int mpi_world_size, const std::function<const char*(const char*)>& getenv) {
  struct Source {
    const char* var;
    const char* launcher;
  };
  // srun sets SLURM_PROCID per task; only then do its task counts describe this MPI world.
  const Source sources[] = {{"OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
                            {"PMI_SIZE", "the PMI launcher"},
                            {"SLURM_STEP_NUM_TASKS", "srun"},
                            {"SLURM_NTASKS", "srun"}};
  for (const auto& s : sources) {
    const char* v = getenv(s.var);
    if (!v || !*v) continue;
    if (std::string(s.var).rfind("SLURM_", 0) == 0 && !getenv("SLURM_PROCID")) continue;
    long expected = std::strtol(v, nullptr, 10);
    if (expected > 0 && expected != mpi_world_size) {
      return "broken launch: " + std::string(s.launcher) + " started " + std::to_string(expected) +
             " tasks (" + s.var + "=" + v + ") but MPI sees a world of " + std::to_string(mpi_world_size) +
             ". The processes did not join one MPI job: with srun use --mpi=pmix (check `srun --mpi=list`), "
             "or launch with the mpirun of the MPI conveyor was built against";
    }
    if (expected > 0) break;  // the first announced size is authoritative
  }
  return "";
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int provided = 0;
  CONVEYOR_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  CONVEYOR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  set_process_identity(rank_, -1);
  host_ = process_identity().host;
  std::string bad = check_launch(size_, [](const char* k) { return std::getenv(k); });
  if (!bad.empty()) CONVEYOR_THROW(bad);
  CONVEYOR_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_comm_));
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(local_comm_, &local_rank_));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(local_comm_, &local_size_));
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Unwinding an error: MPI_Finalize would wait for peers that may be blocked in a collective with
  // us; main() reports the error and MPI_Abort ends every rank instead.
  if (std::uncaught_exceptions() > 0) return;
  if (local_comm_ != MPI_COMM_NULL) MPI_Comm_free(&local_comm_);
  MPI_Finalize();
}

long long MpiRuntime::all_max(long long v) const {
  long long out = 0;
  CONVEYOR_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

long long MpiRuntime::all_min(long long v) const {
  long long out = 0;
  CONVEYOR_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  return out;
}

bool mpi_is_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

void abort_job(int code) {
  if (mpi_is_initialized()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
  }
  std::exit(code);
}

}  // namespace conveyor
