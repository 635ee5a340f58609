// gtest main for multi-rank tests run under mpirun: every rank runs every test, then the ranks agree
// on one verdict (a failure anywhere fails all), so ctest sees the same result from each process.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "runtime/core/error.h"
#include "tests/support/gpu_presence.h"
#include "tests/support/test_support.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  conveyor::set_process_identity(rank, -1);
  ::testing::InitGoogleTest(&argc, argv);
  std::string self = argv[0];
  // Ranks may share a GPU (the shared-device transports); a GPU test that needs one GPU per rank skips
  // itself, and a GPU run where every test skipped is "not run" (77).
  if (self.find("_gpu_") != std::string::npos && conveyor::testing::gpu_count() == 0) {
    int code = conveyor::testing::gpu_required() ? 1 : 77;
    if (rank == 0) std::fprintf(stderr, "%s: no CUDA device for %d ranks\n", code == 1 ? "FAIL" : "not run", size);
    MPI_Finalize();
    return code;
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int local_ran = unit.test_to_run_count() - unit.skipped_test_count();
  int any_failed = 0, any_ran = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&local_ran, &any_ran, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (local_failed && rank != 0) std::fprintf(stderr, "rank %d: tests FAILED\n", rank);
  const bool skipped = self.find("_gpu_") != std::string::npos && !any_failed && any_ran == 0 &&
                       unit.test_to_run_count() > 0;
  if (rank == 0) std::printf("ranks agree: %s\n", any_failed ? "FAILED" : skipped ? "not run (every test skipped)" : "passed");
  MPI_Finalize();
  return any_failed ? 1 : skipped ? 77 : 0;
}
