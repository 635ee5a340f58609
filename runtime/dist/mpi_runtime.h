// MPI bootstrap: initialises MPI (thread-multiple, for the watchdog), learns the local rank through
// MPI_Comm_split_type(SHARED), records the process identity for error messages, and refuses a broken
// launch (e.g. srun without PMIx starting N singletons) before any other work.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace conveyor {

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  MPI_Comm local_comm() const { return local_comm_; }

  // All ranks agree on a value: the maximum (e.g. of a failure flag) or the minimum.
  long long all_max(long long v) const;
  long long all_min(long long v) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string host_;
  MPI_Comm local_comm_ = MPI_COMM_NULL;
};

// "" when the MPI world matches what the launcher announced in the environment, otherwise a message
// explaining the mismatch. `getenv` is injectable for tests.
std::string check_launch(int mpi_world_size, const std::function<const char*(const char*)>& getenv);

bool mpi_is_initialized();
// Ends the whole job: MPI_Abort when MPI runs with more than one rank, otherwise exit.
[[noreturn]] void abort_job(int code);

}  // namespace conveyor
