// Every Communicator call over NCCL on device memory, two ranks on two GPUs, plus the process groups
// of the pp=2 and tp=2 layouts. NCCL needs one GPU per rank: with fewer the tests skip (not run on one
// GPU; the shared-GPU transport has staged_communicator_gpu_mpi_test).
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/dist/cuda/nccl_communicator.h"
#include "runtime/dist/device.h"
#include "runtime/dist/mpi_runtime.h"
#include "runtime/dist/process_groups.h"
#include "tests/support/communicator_checks.h"
#include "tests/support/gpu_presence.h"
#include "tests/support/mpi_world.h"

namespace conveyor {
namespace {

using testing::world_rank;
using testing::world_size;

#define SKIP_UNLESS_ONE_GPU_PER_RANK()                                                                    \
  do {                                                                                                    \
    if (testing::gpu_count() < world_size())                                                              \
      GTEST_SKIP() << "NCCL needs one GPU per rank: " << world_size() << " ranks, " << testing::gpu_count() \
                   << " GPU(s)";                                                                          \
  } while (0)

TEST(NcclCommunicator, WorldAllCalls) {
  SKIP_UNLESS_ONE_GPU_PER_RANK();
  auto dev = make_device(Backend::kCuda, world_rank());
  NcclCommunicator comm(MPI_COMM_WORLD, "world");
  Stream s = dev->create_stream();
  testing::check_all_calls(comm, *dev, s);
  EXPECT_EQ(comm.async_error(), "");
  dev->destroy_stream(s);
}

TEST(NcclCommunicator, PipelineAndTensorGroups) {
  SKIP_UNLESS_ONE_GPU_PER_RANK();
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  auto dev = make_device(Backend::kCuda, world_rank());
  Stream s = dev->create_stream();
  for (Layout layout : {Layout{1, n, 1}, Layout{1, 1, n}}) {
    WorldConfig world(layout, world_rank());
    auto groups = make_process_groups(world, Backend::kCuda);
    EXPECT_STREQ(groups->pipeline->kind(), "nccl");
    testing::check_send_recv(*groups->pipeline, *dev, s);
    testing::check_all_reduce(*groups->tensor, *dev, s);
    testing::check_all_gather(*groups->tensor, *dev, s);
  }
  dev->destroy_stream(s);
}

}  // namespace
}  // namespace conveyor
