// The communicators of one rank, built from its WorldConfig: its TP group, its pipeline (same data
// replica and tensor rank, ordered by stage) and its DP group. On the CPU backend they are MPI
// communicators. On the CUDA backend each group's transport is chosen from parallel.data_transport and
// whether its ranks share a GPU (data_transport.h): NCCL where the devices are distinct, host-staged MPI
// where they are not. `world` is always MPI (control traffic).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "runtime/dist/communicator.h"
#include "runtime/dist/data_transport.h"
#include "runtime/dist/device.h"
#include "runtime/dist/world_config.h"

namespace conveyor {

struct ProcessGroups {
  std::unique_ptr<Communicator> world;     // MPI, all ranks
  std::unique_ptr<Communicator> tensor;    // group rank = tensor rank
  std::unique_ptr<Communicator> pipeline;  // group rank = stage
  std::unique_ptr<Communicator> data;      // group rank = data replica
  // MPI communicators of the same groups (owned), for control messages next to NCCL traffic.
  MPI_Comm tensor_mpi = MPI_COMM_NULL;
  MPI_Comm pipeline_mpi = MPI_COMM_NULL;
  MPI_Comm data_mpi = MPI_COMM_NULL;
  int ranks_on_device = 1;  // world ranks computing on this rank's device, itself included (CUDA)
  std::string transports;   // "tensor groups: nccl, pipeline groups: staged (...)": the same on every rank
  ~ProcessGroups();
};

// Collective over MPI_COMM_WORLD: every rank must call it with the same layout and transport, after
// making its device current. World rank 0 logs `transports` once.
std::unique_ptr<ProcessGroups> make_process_groups(const WorldConfig& world, Backend backend,
                                                   DataTransport transport = DataTransport::kAuto);

}  // namespace conveyor
