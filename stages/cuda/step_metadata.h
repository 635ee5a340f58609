// The per-step metadata of the CUDA backend on the device: token ids, positions, query starts, block
// tables, logit rows and the step's longest context, uploaded in ONE async copy from a pinned ring.
// Every buffer is sized at start-up from the scheduler's limits (StepMetadataLimits), so no step
// inside them allocates:
// - an eager step packs its arrays into one buffer for the largest step;
// - a graph step (fixed) writes each array at a fixed offset of a second buffer sized for the largest
//   decode bucket and block-table stride, so every graph of every layout reads the same addresses
//   (a graph is replayed only right after its own layout's metadata was written, on the same stream).
// A step beyond the limits still runs: the eager buffer grows; a graph layout gets a buffer of its
// own (allocated once per layout).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

#include "stages/backend.h"
#include "stages/cuda/cuda_memory.h"

namespace conveyor {

struct StepMetadataLimits {
  int64_t max_tokens = 8192;       // scheduler.max_num_batched_tokens
  int64_t max_seqs = 256;          // scheduler.max_num_seqs
  int64_t max_blocks_per_seq = 512;  // the context length over the KV block size
};

// Device addresses of one step's arrays (null where the array is empty).
struct StepMetadataOnDevice {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* logit_rows = nullptr;
  const int32_t* max_context_len = nullptr;  // one int32: the longest context of the step
};

class StepMetadata {
 public:
  explicit StepMetadata(const StepMetadataLimits& limits);
  // Device bytes the constructor allocates (the memory plan counts them).
  static size_t device_bytes(const StepMetadataLimits& limits);

  // Copies b's arrays to the device on `stream`; `fixed`: at the addresses of the graph layout.
  StepMetadataOnDevice upload(const BatchInfo& b, int32_t max_context, bool fixed, cudaStream_t stream);

 private:
  using Sizes = std::array<size_t, 5>;  // ids, positions, query_start, block_tables, logit_rows
  // Offsets (int32 elements) of the five arrays and the max context in `buf`, and the ints to copy.
  struct Placement {
    std::array<size_t, 6> offset{};
    size_t ints = 0;
  };
  static Placement packed(const Sizes& sizes);
  Placement fixed_placement(const Sizes& sizes) const;  // ints == 0 when the layout does not fit

  int fixed_bucket_;  // the largest decode bucket and stride the fixed buffer holds
  int fixed_stride_;
  PinnedRing staging_;
  GrowingBuffer eager_;
  GrowingBuffer fixed_;
  std::map<Sizes, GrowingBuffer> overflow_;  // graph layouts beyond the limits
};

}  // namespace conveyor
