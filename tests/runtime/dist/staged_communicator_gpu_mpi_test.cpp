// The host-staged transport for ranks that share a GPU: every Communicator call (send/recv, isend/
// irecv, all-reduce of every dtype incl. bf16 and fp32, all-gather, broadcast, barrier) on device
// memory against the host reference of communicator_checks, random values, at 2 and 4 ranks on
// whatever GPUs there are (all on one when there is one); the process groups' transport choice
// (auto -> staged where a group shares a device, nccl refused there), and the pinned blocks reused.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "runtime/core/error.h"
#include "runtime/dist/cuda/staged_communicator.h"
#include "runtime/dist/device.h"
#include "runtime/dist/process_groups.h"
#include "tests/support/communicator_checks.h"
#include "tests/support/gpu_presence.h"
#include "tests/support/mpi_world.h"

namespace conveyor {
namespace {

using testing::world_rank;
using testing::world_size;

TEST(StagedCommunicator, WorldAllCalls) {
  auto dev = make_device(Backend::kCuda, world_rank());
  StagedCommunicator comm(MPI_COMM_WORLD, "world (staged)");
  EXPECT_STREQ(comm.kind(), "staged");
  EXPECT_FALSE(comm.capturable());
  Stream s = dev->create_stream();
  testing::check_all_calls(comm, *dev, s);
  // Blocks go back to the pool and are lent again: a second round allocates few or none.
  const size_t after_first = comm.pinned_blocks();
  testing::check_all_calls(comm, *dev, s);
  EXPECT_LE(comm.pinned_blocks(), after_first + 2);
  dev->destroy_stream(s);
}

TEST(StagedCommunicator, ProcessGroupsPickStagedWhereRanksShareAGpu) {
  const int n = world_size();
  auto dev = make_device(Backend::kCuda, world_rank());
  Stream s = dev->create_stream();
  const bool shared = testing::gpu_count() < n;
  for (Layout layout : {Layout{1, n, 1}, Layout{1, 1, n}, Layout{1, 2, n / 2}}) {
    SCOPED_TRACE("pp " + std::to_string(layout.pipeline) + " tp " + std::to_string(layout.tensor));
    WorldConfig world(layout, world_rank());
    auto groups = make_process_groups(world, Backend::kCuda, DataTransport::kAuto);
    EXPECT_EQ(groups->ranks_on_device, shared ? n / testing::gpu_count() + (world_rank() % testing::gpu_count() <
                                                                            n % testing::gpu_count())
                                              : 1);
    Communicator& busy = layout.pipeline > 1 ? *groups->pipeline : *groups->tensor;
    if (shared) {
      EXPECT_STREQ(busy.kind(), "staged") << groups->transports;
    }
    EXPECT_NE(groups->transports.find(shared ? "staged" : "nccl"), std::string::npos) << groups->transports;
    testing::check_send_recv(*groups->pipeline, *dev, s);
    testing::check_all_reduce(*groups->tensor, *dev, s);
    testing::check_all_gather(*groups->tensor, *dev, s);
    testing::check_broadcast(*groups->tensor, *dev, s);
  }
  // Forced staged works on distinct GPUs too.
  WorldConfig world(Layout{1, n, 1}, world_rank());
  auto staged = make_process_groups(world, Backend::kCuda, DataTransport::kStaged);
  EXPECT_STREQ(staged->pipeline->kind(), "staged");
  testing::check_isend_irecv(*staged->pipeline, *dev, s);
  dev->destroy_stream(s);
}

TEST(StagedCommunicator, NcclOnASharedGpuIsRefusedWithTheReason) {
  if (testing::gpu_count() >= world_size()) GTEST_SKIP() << "every rank has its own GPU";
  auto dev = make_device(Backend::kCuda, world_rank());
  WorldConfig world(Layout{1, world_size(), 1}, world_rank());
  std::string msg;
  try {
    make_process_groups(world, Backend::kCuda, DataTransport::kNccl);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("Duplicate GPU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pipeline of data 0"), std::string::npos) << msg;
  // Every rank of the world shares the pipeline group, so all threw before any NCCL call: in step.
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace conveyor
