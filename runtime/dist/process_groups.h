// The communicators of one rank, built from its WorldConfig: its TP group, its pipeline (same data
// replica and tensor rank, ordered by stage) and its DP group. On the CUDA backend they are NCCL
// communicators; on the CPU backend MPI ones. `world` is always MPI (control traffic).
#pragma once

#include <mpi.h>

#include <memory>

#include "runtime/dist/communicator.h"
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
  ~ProcessGroups();
};

// Collective over MPI_COMM_WORLD: every rank must call it with the same layout.
std::unique_ptr<ProcessGroups> make_process_groups(const WorldConfig& world, Backend backend);

}  // namespace conveyor
