// parallel.data_transport (see data_transport.h).
#include "runtime/dist/data_transport.h"

#include <algorithm>
#include <cstring>

#include "runtime/core/error.h"

namespace conveyor {

DataTransport parse_data_transport(const std::string& name) {
  if (name == "auto") return DataTransport::kAuto;
  if (name == "nccl") return DataTransport::kNccl;
  if (name == "staged") return DataTransport::kStaged;
  if (name == "ipc") return DataTransport::kIpc;
  CONVEYOR_THROW("parallel.data_transport = '", name, "' is not one of auto, nccl, staged, ipc");
}

const char* transport_name(DataTransport t) {
  switch (t) {
    case DataTransport::kAuto: return "auto";
    case DataTransport::kNccl: return "nccl";
    case DataTransport::kStaged: return "staged";
    case DataTransport::kIpc: return "ipc";
  }
  return "?";
}

DataTransport choose_transport(DataTransport configured, bool shares_device, const std::string& group) {
  CONVEYOR_CHECK(configured != DataTransport::kIpc,
                 "parallel.data_transport = ipc (CUDA IPC between ranks on one GPU) is not built yet; use auto or "
                 "staged (host-staged MPI over pinned buffers)");
  CONVEYOR_CHECK(!(configured == DataTransport::kNccl && shares_device), "parallel.data_transport = nccl, but ranks "
                 "of the ", group, " share one GPU, and NCCL refuses two ranks of one communicator on one device "
                 "(\"Duplicate GPU detected\"); use auto or staged, or give every rank its own GPU");
  if (configured != DataTransport::kAuto) return configured;
  return shares_device ? DataTransport::kStaged : DataTransport::kNccl;
}

std::vector<std::string> gather_identities(MPI_Comm comm, const std::string& mine) {
  constexpr int kLen = 256;
  int size = 1;
  CONVEYOR_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<char> out(static_cast<size_t>(size) * kLen, '\0');
  char buf[kLen] = {};
  std::strncpy(buf, mine.c_str(), kLen - 1);
  CONVEYOR_MPI_CHECK(MPI_Allgather(buf, kLen, MPI_CHAR, out.data(), kLen, MPI_CHAR, comm));
  std::vector<std::string> ids;
  for (int r = 0; r < size; ++r) ids.emplace_back(out.data() + static_cast<size_t>(r) * kLen);
  return ids;
}

bool has_duplicate(const std::vector<std::string>& identities) {
  std::vector<std::string> sorted = identities;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
}

int count_equal(const std::vector<std::string>& identities, const std::string& mine) {
  return static_cast<int>(std::count(identities.begin(), identities.end(), mine));
}

}  // namespace conveyor
