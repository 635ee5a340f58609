// The start-up memory table (see memory_table.h). Rows travel as fixed arrays of doubles plus a
// fixed-width host name, so one MPI_Allgather each carries them.
#include "stages/memory_table.h"

#include <mpi.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {
namespace {

constexpr int kFields = 17;
constexpr int kHostChars = 64;

std::array<double, kFields> pack(const MemoryRow& r) {
  return {static_cast<double>(r.rank), static_cast<double>(r.stage), static_cast<double>(r.tp_rank),
          static_cast<double>(r.device), r.total, r.allowed, r.in_use, r.weights, r.activations, r.sampling,
          r.graphs, r.margin, static_cast<double>(r.kv_blocks), r.kv_block_bytes,
          static_cast<double>(r.ranks_on_device), static_cast<double>(r.kv_elem_bytes), r.fp8_weights ? 1.0 : 0.0};
}

MemoryRow unpack(const double* f, const char* host) {
  MemoryRow r;
  r.rank = static_cast<int>(f[0]);
  r.stage = static_cast<int>(f[1]);
  r.tp_rank = static_cast<int>(f[2]);
  r.device = static_cast<int>(f[3]);
  r.total = f[4];
  r.allowed = f[5];
  r.in_use = f[6];
  r.weights = f[7];
  r.activations = f[8];
  r.sampling = f[9];
  r.graphs = f[10];
  r.margin = f[11];
  r.kv_blocks = static_cast<long long>(f[12]);
  r.kv_block_bytes = f[13];
  r.ranks_on_device = static_cast<int>(f[14]);
  r.kv_elem_bytes = static_cast<int>(f[15]);
  r.fp8_weights = f[16] != 0.0;
  r.host.assign(host, strnlen(host, kHostChars));
  return r;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// What the weights and the KV cache are stored as (every rank runs the same options: the first row's).
std::string storage_line(const std::vector<MemoryRow>& rows) {
  if (rows.empty()) return "";
  const MemoryRow& r = rows.front();
  const std::string kv = r.kv_elem_bytes == 1 ? "fp8_e4m3 (1 byte per element)"
                                              : std::to_string(r.kv_elem_bytes * 8) + "-bit (" +
                                                    std::to_string(r.kv_elem_bytes) + " bytes per element)";
  return std::string("weights: ") + (r.fp8_weights ? "fp8_e4m3 layer linears" : "16-bit") + "; KV cache: " + kv +
         ", " + format_bytes(r.kv_block_bytes) + " per block\n";
}

}  // namespace

std::string format_memory_table(const std::vector<MemoryRow>& rows, double utilization, bool per_rank) {
  char line[512];
  std::snprintf(line, sizeof(line), "%5s %-12s %5s %3s %4s %7s %8s %8s %8s %8s %8s %8s %8s %8s %9s %10s\n", "rank",
                "host", "stage", "tp", "gpu", "sharing", "total", "usable", "in use", "weights", "activ.", "sampling",
                "graphs", "margin", "KV left", "KV blocks");
  bool shared = false;
  for (const MemoryRow& r : rows) shared = shared || r.ranks_on_device > 1;
  char head[192];
  if (per_rank) {
    std::snprintf(head, sizeof(head), "GPU memory per rank (GiB; usable = cache.gpu_memory_utilization_per_rank %.2f "
                  "x total):\n", utilization);
  } else {
    std::snprintf(head, sizeof(head), "GPU memory per rank (GiB; usable = cache.gpu_memory_utilization %.2f x total%s):\n",
                  utilization, shared ? " / the ranks sharing the GPU; in use: their share" : "");
  }
  std::string out = head + storage_line(rows) + std::string(line);
  bool short_of_room = false;
  for (const MemoryRow& r : rows) {
    const bool fits = r.kv_blocks > 0;
    short_of_room = short_of_room || !fits;
    std::snprintf(line, sizeof(line), "%5d %-12.12s %5d %3d %4d %7d %8s %8s %8s %8s %8s %8s %8s %8s %9s %10lld%s\n",
                  r.rank, r.host.c_str(), r.stage, r.tp_rank, r.device, r.ranks_on_device, gib(r.total).c_str(), gib(r.allowed).c_str(),
                  gib(r.in_use).c_str(), gib(r.weights).c_str(), gib(r.activations).c_str(), gib(r.sampling).c_str(),
                  gib(r.graphs).c_str(), gib(r.margin).c_str(), gib(r.left()).c_str(), r.kv_blocks,
                  fits ? "" : "  <- does not fit");
    out += line;
  }
  if (short_of_room)
    out += "A rank marked above has no room for one KV block (" +
           format_bytes(rows.empty() ? 0.0 : rows.front().kv_block_bytes) +
           "). Use more GPUs (parallel.pipeline / parallel.tensor), move layers off that stage "
           "(parallel.partition), raise cache.gpu_memory_utilization, or lower scheduler.max_num_batched_tokens "
           "or scheduler.max_num_seqs.\n";
  return out;
}

std::vector<MemoryRow> require_memory_fit(const MemoryRow& mine, double utilization, bool per_rank) {
  int size = 1;
  CONVEYOR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const std::array<double, kFields> packed = pack(mine);
  std::vector<double> all(static_cast<size_t>(size) * kFields);
  CONVEYOR_MPI_CHECK(MPI_Allgather(packed.data(), kFields, MPI_DOUBLE, all.data(), kFields, MPI_DOUBLE, MPI_COMM_WORLD));
  char host[kHostChars] = {0};
  std::strncpy(host, mine.host.c_str(), kHostChars - 1);
  std::vector<char> hosts(static_cast<size_t>(size) * kHostChars);
  CONVEYOR_MPI_CHECK(MPI_Allgather(host, kHostChars, MPI_CHAR, hosts.data(), kHostChars, MPI_CHAR, MPI_COMM_WORLD));
  std::vector<MemoryRow> rows;
  bool fits = true;
  for (int r = 0; r < size; ++r) {
    rows.push_back(unpack(all.data() + static_cast<size_t>(r) * kFields, hosts.data() + static_cast<size_t>(r) * kHostChars));
    fits = fits && rows.back().kv_blocks > 0;
  }
  if (!fits) CONVEYOR_THROW("this layout does not fit in GPU memory\n", format_memory_table(rows, utilization, per_rank));
  return rows;
}

}  // namespace conveyor
