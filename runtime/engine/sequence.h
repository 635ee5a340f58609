// One request's state on the leader's scheduler: its tokens (prompt, then outputs), how many of them
// are in the KV cache, and the blocks holding them. Prompt and outputs stay apart because the sampler
// keys its randomness and penalties on the outputs, which must survive preemption by recompute.
// Invariant: num_computed <= num_tokens(), and blocks has slots for at least num_computed positions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/engine/block_allocator.h"

namespace conveyor {

enum class SeqStatus { kWaiting, kRunning };  // a finished sequence leaves the scheduler

struct Sequence {
  Sequence(int64_t seq_id, uint64_t arrival_order, std::vector<int32_t> prompt, BlockAllocator& allocator,
           int block_size)
      : id(seq_id), arrival(arrival_order), prompt_ids(std::move(prompt)), blocks(allocator, block_size) {}

  int64_t id;
  uint64_t arrival;                 // admission order: lower is older, older is served first
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  SeqStatus status = SeqStatus::kWaiting;
  int32_t num_computed = 0;         // tokens whose K/V are in the cache
  bool in_flight = false;           // part of a plan whose result has not come back
  int num_preemptions = 0;
  BlockTable blocks;

  int32_t num_tokens() const { return static_cast<int32_t>(prompt_ids.size() + output_ids.size()); }
  int32_t token(int32_t pos) const {
    const int32_t p = static_cast<int32_t>(prompt_ids.size());
    return pos < p ? prompt_ids[pos] : output_ids[pos - p];
  }
  // Tokens still to run through the model: a prefill (or recompute) when > 1, a decode when 1.
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
};

}  // namespace conveyor
