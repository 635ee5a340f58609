// Builds a rank's communicators (see process_groups.h).
#include "runtime/dist/process_groups.h"

#include <array>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/dist/mpi_communicator.h"
#include "runtime/dist/mpi_runtime.h"
#ifdef CONVEYOR_WITH_CUDA
#include "runtime/dist/cuda/nccl_communicator.h"
#include "runtime/dist/cuda/staged_communicator.h"
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

// What one group's transport was, for the start-up line: bit 0 mpi, 1 nccl, 2 staged; bit 3 set when
// its ranks share a device.
int transport_bits(const char* kind, bool shared) {
  const std::string k = kind;
  const int bit = k == "nccl" ? 2 : k == "staged" ? 4 : 1;
  return bit | (shared ? 8 : 0);
}

std::unique_ptr<Communicator> wrap(MPI_Comm group, Backend backend, DataTransport transport, bool shared,
                                   const std::string& name) {
#ifdef CONVEYOR_WITH_CUDA
  if (backend == Backend::kCuda) {
    if (choose_transport(transport, shared, name) == DataTransport::kStaged)
      return std::make_unique<StagedCommunicator>(group, name);
    return std::make_unique<NcclCommunicator>(group, name);
  }
#endif
  (void)transport;
  (void)shared;
  CONVEYOR_CHECK(backend == Backend::kCpu, "CUDA backend requested in a build without CUDA");
  // The MPI communicator owns its handle: give it a duplicate so ProcessGroups keeps its own.
  MPI_Comm dup = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(group, &dup));
  return std::make_unique<MpiCommunicator>(dup, name);
}

// One line for the whole world: each kind of group with the transports its groups use (every rank's
// bits OR-ed), groups of one rank left out.
std::string describe_transports(const std::array<int, 3>& mine) {
  std::array<int, 3> all{};
  CONVEYOR_MPI_CHECK(MPI_Allreduce(mine.data(), all.data(), 3, MPI_INT, MPI_BOR, MPI_COMM_WORLD));
  const char* kinds[3] = {"tensor groups", "pipeline groups", "data groups"};
  std::string line;
  for (int i = 0; i < 3; ++i) {
    if (all[i] == 0) continue;
    std::string used;
    for (auto [bit, name] : {std::pair<int, const char*>{1, "mpi"}, {2, "nccl"}, {4, "staged"}})
      if (all[i] & bit) used += std::string(used.empty() ? "" : " and ") + name;
    if (all[i] & 8) used += " (ranks share a GPU)";
    line += std::string(line.empty() ? "" : ", ") + kinds[i] + ": " + used;
  }
  return line.empty() ? "every group has one rank" : line;
}

}  // namespace

std::unique_ptr<ProcessGroups> make_process_groups(const WorldConfig& world, Backend backend,
                                                   DataTransport transport) {
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
  const std::string me = device_identity(backend);
  if (backend == Backend::kCuda) g->ranks_on_device = count_equal(gather_identities(MPI_COMM_WORLD, me), me);
  std::string where = "data " + std::to_string(c.data) + ", stage " + std::to_string(c.stage);
  const std::array<std::string, 3> names = {
      "tensor group of " + where, "pipeline of data " + std::to_string(c.data) + ", tensor " + std::to_string(c.tensor),
      "data group of stage " + std::to_string(c.stage) + ", tensor " + std::to_string(c.tensor)};
  const std::array<MPI_Comm, 3> comms = {g->tensor_mpi, g->pipeline_mpi, g->data_mpi};
  std::array<std::unique_ptr<Communicator>*, 3> slots = {&g->tensor, &g->pipeline, &g->data};
  std::array<int, 3> bits{};
  for (size_t i = 0; i < 3; ++i) {
    const bool shared = backend == Backend::kCuda && has_duplicate(gather_identities(comms[i], me));
    *slots[i] = wrap(comms[i], backend, transport, shared, names[i]);
    if ((*slots[i])->size() > 1) bits[i] = transport_bits((*slots[i])->kind(), shared);
  }
  g->transports = describe_transports(bits);
  if (world.rank() == 0) spdlog::info("data transport: {}", g->transports);
  return g;
}

}  // namespace conveyor
