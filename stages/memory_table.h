// Start-up memory plan of every GPU rank and the table printed when a layout does not fit: each rank
// computes its row (what its KV budget was derived from), all rows are gathered, and if any rank has
// no room for a KV block every rank fails with the same per-rank table, before any weight is uploaded.
// The table's head names the weights' and the KV cache's storage (FP8 or 16-bit).
#pragma once

#include <string>
#include <vector>

namespace conveyor {

struct MemoryRow {
  int rank = 0;
  int stage = 0;
  int tp_rank = 0;
  int device = 0;
  std::string host;
  double total = 0;        // device memory
  double allowed = 0;      // cache.gpu_memory_utilization x total / ranks_on_device (or the per-rank key)
  double in_use = 0;       // taken at start-up (CUDA context, NCCL, other processes), its share on a shared GPU
  double weights = 0;      // this rank's share in the model dtype
  double activations = 0;  // the largest step's live tensors
  double sampling = 0;     // logits and sampler buffers
  double graphs = 0;       // decode graphs' private pools
  double margin = 0;       // library workspaces, fragmentation
  long long kv_blocks = 0; // what is left, in KV blocks (0 or less: does not fit)
  double kv_block_bytes = 0;
  int ranks_on_device = 1;  // ranks sharing this GPU; `allowed` is this rank's share
  int kv_elem_bytes = 2;    // a cached K or V element: 1 for the FP8 (e4m3) KV cache
  bool fp8_weights = false; // layer linears held as e4m3 codes + scales

  double reserved() const { return weights + activations + sampling + graphs + margin; }
  double left() const { return allowed - in_use - reserved(); }
};

// The table: one line per rank with every term, the verdict and, when some rank does not fit, what
// to change. Ranks in the order given. per_rank: utilization is cache.gpu_memory_utilization_per_rank.
std::string format_memory_table(const std::vector<MemoryRow>& rows, double utilization, bool per_rank = false);

// Gathers every rank's row over MPI_COMM_WORLD (collective); throws on every rank, with the table,
// when any row has kv_blocks <= 0. Returns the rows (rank order) otherwise.
std::vector<MemoryRow> require_memory_fit(const MemoryRow& mine, double utilization, bool per_rank = false);

}  // namespace conveyor
