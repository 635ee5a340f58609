#include "stages/cpu_probe_mpi.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "runtime/core/error.h"

namespace conveyor {

void wait_napping(MPI_Request* r) {
  auto pause = std::chrono::microseconds(2);
  for (int done = 0;;) {
    CONVEYOR_MPI_CHECK(MPI_Test(r, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
}

void nap_until(std::chrono::steady_clock::time_point until) {
  auto pause = std::chrono::microseconds(2);
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
}

void polite_barrier(MPI_Comm comm) {
  MPI_Request r;
  CONVEYOR_MPI_CHECK(MPI_Ibarrier(comm, &r));
  wait_napping(&r);
}

std::vector<std::vector<int64_t>> gather_to_root(MPI_Comm comm, const std::vector<int64_t>& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), offsets(static_cast<size_t>(size), 0);
  CONVEYOR_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  for (size_t r = 1; r < counts.size(); ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<int64_t> all(rank == 0 ? static_cast<size_t>(offsets.back() + counts.back()) : 0);
  CONVEYOR_MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), offsets.data(),
                                 MPI_INT64_T, 0, comm));
  std::vector<std::vector<int64_t>> out;
  for (size_t r = 0; rank == 0 && r < counts.size(); ++r)
    out.emplace_back(all.begin() + offsets[r], all.begin() + offsets[r] + counts[r]);
  return out;
}

}  // namespace conveyor
