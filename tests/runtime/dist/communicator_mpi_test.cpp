// Every Communicator call over the MPI transport, on the world and on the groups of every layout that
// fits the number of ranks (run with 2 and 4 ranks by ctest).
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/core/error.h"
#include "runtime/dist/device.h"
#include "runtime/dist/mpi_communicator.h"
#include "runtime/dist/process_groups.h"
#include "tests/support/communicator_checks.h"
#include "tests/support/mpi_world.h"

namespace conveyor {
namespace {

using testing::world_rank;
using testing::world_size;

TEST(MpiCommunicator, WorldAllCalls) {
  auto dev = make_device(Backend::kCpu, 0);
  MPI_Comm dup;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
  MpiCommunicator comm(dup, "world");
  EXPECT_EQ(comm.size(), world_size());
  EXPECT_EQ(comm.rank(), world_rank());
  testing::check_all_calls(comm, *dev, nullptr);
}

TEST(MpiCommunicator, BadPeerIsAClearError) {
  MPI_Comm dup;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
  MpiCommunicator comm(dup, "world");
  float x = 1.f;
  try {
    comm.send(&x, 1, world_size() + 3);
    FAIL() << "send to a peer outside the group did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside group"), std::string::npos) << e.what();
  }
}

// Every layout of the world: the groups have the right members and every call works inside each.
TEST(ProcessGroups, EveryLayoutEveryGroup) {
  int n = world_size();
  auto dev = make_device(Backend::kCpu, 0);
  for (int tp = 1; tp <= n; ++tp) {
    for (int pp = 1; pp * tp <= n; ++pp) {
      if (n % (tp * pp) != 0) continue;
      Layout layout{n / (tp * pp), pp, tp};
      WorldConfig world(layout, world_rank());
      auto groups = make_process_groups(world, Backend::kCpu);
      SCOPED_TRACE("layout dp " + std::to_string(layout.data) + " pp " + std::to_string(pp) + " tp " +
                   std::to_string(tp));
      EXPECT_EQ(groups->tensor->size(), tp);
      EXPECT_EQ(groups->tensor->rank(), world.tensor_rank());
      EXPECT_EQ(groups->pipeline->size(), pp);
      EXPECT_EQ(groups->pipeline->rank(), world.stage());
      EXPECT_EQ(groups->data->size(), layout.data);
      EXPECT_EQ(groups->data->rank(), world.data_rank());
      // The members are the world ranks WorldConfig names: gather world ranks inside each group.
      struct Named {
        Communicator* comm;
        std::vector<int> want;
      };
      for (const Named& g : {Named{groups->tensor.get(), world.tensor_group()},
                             Named{groups->pipeline.get(), world.pipeline_group()},
                             Named{groups->data.get(), world.data_group()}}) {
        int me = world.rank();
        std::vector<int> got(g.comm->size());
        g.comm->all_gather(&me, got.data(), 1);
        EXPECT_EQ(got, g.want) << g.comm->name();
      }
      testing::check_send_recv(*groups->pipeline, *dev, nullptr);
      testing::check_all_reduce(*groups->tensor, *dev, nullptr);
      testing::check_broadcast(*groups->data, *dev, nullptr);
    }
  }
}

}  // namespace
}  // namespace conveyor
