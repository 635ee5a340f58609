// Builds a rank's communicators (see process_groups.h).
#include "runtime/dist/process_groups.h"

#include "runtime/core/error.h"
#include "runtime/dist/mpi_communicator.h"
#include "runtime/dist/mpi_runtime.h"
#ifdef CONVEYOR_WITH_CUDA
#include "runtime/dist/cuda/nccl_communicator.h"
#endif

namespace conveyor {

ProcessGroups::~ProcessGroups() {
  // Communicators go first: NCCL ones were bootstrapped over these MPI communicators.
  tensor.reset();
  pipeline.reset();
  data.reset();
  world.reset();
  if (mpi_is_initialized()) {
    for (MPI_Comm* c : {&tensor_mpi, &pipeline_mpi, &data_mpi})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

namespace {

MPI_Comm split(int color, int key) {
  MPI_Comm c = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
  return c;
}

std::unique_ptr<Communicator> wrap(MPI_Comm group, Backend backend, const std::string& name) {
#ifdef CONVEYOR_WITH_CUDA
  if (backend == Backend::kCuda) return std::make_unique<NcclCommunicator>(group, name);
#endif
  CONVEYOR_CHECK(backend == Backend::kCpu, "CUDA backend requested in a build without CUDA");
  // The MPI communicator owns its handle: give it a duplicate so ProcessGroups keeps its own.
  MPI_Comm dup = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(group, &dup));
  return std::make_unique<MpiCommunicator>(dup, name);
}

}  // namespace

std::unique_ptr<ProcessGroups> make_process_groups(const WorldConfig& world, Backend backend) {
  int mpi_size = 0;
  CONVEYOR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size));
  CONVEYOR_CHECK(mpi_size == world.world_size(), "layout has ", world.world_size(), " ranks but MPI has ",
                 mpi_size);
  auto g = std::make_unique<ProcessGroups>();
  RankCoord c = world.coord();
  g->tensor_mpi = split(world.tensor_group_color(), c.tensor);
  g->pipeline_mpi = split(world.pipeline_group_color(), c.stage);
  g->data_mpi = split(world.data_group_color(), c.data);
  MPI_Comm world_dup = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_dup));
  g->world = std::make_unique<MpiCommunicator>(world_dup, "world");
  std::string where = "data " + std::to_string(c.data) + ", stage " + std::to_string(c.stage);
  g->tensor = wrap(g->tensor_mpi, backend, "tensor group of " + where);
  g->pipeline = wrap(g->pipeline_mpi, backend, "pipeline of data " + std::to_string(c.data) + ", tensor " +
                                                   std::to_string(c.tensor));
  g->data = wrap(g->data_mpi, backend, "data group of stage " + std::to_string(c.stage) + ", tensor " +
                                           std::to_string(c.tensor));
  return g;
}

}  // namespace conveyor
