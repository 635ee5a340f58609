// Which transport carries a GPU group's data plane (parallel.data_transport). NCCL refuses two ranks
// of one communicator on one device, so a group whose ranks share a GPU needs another transport:
// host-staged MPI over pinned buffers (staged) or, not built yet, CUDA IPC between the processes (ipc).
// Device sharing is found by comparing every rank's device identity (host + GPU UUID) over MPI.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace conveyor {

enum class DataTransport { kAuto, kNccl, kStaged, kIpc };

DataTransport parse_data_transport(const std::string& name);  // throws on an unknown name
const char* transport_name(DataTransport t);

// The transport a group of GPU ranks uses: `configured` unless auto (nccl when the devices are
// distinct, else staged); refuses nccl on a shared device and ipc (not built yet), naming the group.
DataTransport choose_transport(DataTransport configured, bool shares_device, const std::string& group);

// Collective over `comm`: every rank's identity, in rank order.
std::vector<std::string> gather_identities(MPI_Comm comm, const std::string& mine);
// Whether two entries are equal (two ranks of a group on one device).
bool has_duplicate(const std::vector<std::string>& identities);
// How many entries equal `mine` (the ranks sharing this rank's device, itself included).
int count_equal(const std::vector<std::string>& identities, const std::string& mine);

}  // namespace conveyor
