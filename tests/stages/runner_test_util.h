// Drives a ModelRunner the way the scheduler will: per sequence a BlockTable from one allocator,
// plans of prefill chunks and decode tokens, greedy choice by argmax (lowest id on ties). Shared by
// the golden and SmolLM2 tests.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "kernels/cpu/softmax.h"
#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "runtime/engine/block_allocator.h"
#include "stages/local_model_runner.h"

namespace conveyor::testing {

inline Config runner_config(const std::string& model_path, int num_blocks, int block_size = 16) {
  Config cfg;
  cfg.set("model.path", model_path, "test");
  cfg.set("cache.num_blocks", std::to_string(num_blocks), "test");
  cfg.set("cache.block_size", std::to_string(block_size), "test");
  return cfg;
}

class Driver {
 public:
  explicit Driver(LocalModelRunner& runner) : runner_(runner), allocator_(runner.num_kv_blocks()) {}

  // Adds the next `tokens` of sequence `id` to `plan` (creating the sequence on first use).
  void add(StepPlan& plan, int64_t id, const std::vector<int32_t>& tokens, bool wants_logits) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) it = seqs_.emplace(id, Seq{BlockTable(allocator_, runner_.block_size()), 0}).first;
    Seq& s = it->second;
    CONVEYOR_CHECK(s.table.append(static_cast<int>(tokens.size())) == AppendResult::kOk, "test ran out of KV blocks");
    plan.seqs.push_back(SeqChunk{id, s.pos, tokens, s.table.blocks(), wants_logits});
    s.pos += static_cast<int32_t>(tokens.size());
  }

  // Runs the plan; returns one logits row per sequence that wanted them, in plan order.
  std::vector<std::vector<float>> run(const StepPlan& plan) {
    std::vector<float> flat;
    runner_.forward(plan, &flat);
    const size_t vocab = static_cast<size_t>(runner_.spec().vocab);
    CONVEYOR_CHECK(flat.size() == plan.num_logits() * vocab, "runner returned ", flat.size(), " logits");
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; i < plan.num_logits(); ++i) rows.emplace_back(flat.begin() + i * vocab, flat.begin() + (i + 1) * vocab);
    return rows;
  }

  // Prefill of one sequence in chunks of `chunk` tokens (0: all at once); the last chunk's logits.
  std::vector<float> prefill(int64_t id, const std::vector<int32_t>& prompt, size_t chunk = 0) {
    if (chunk == 0) chunk = prompt.size();
    std::vector<float> last;
    for (size_t b = 0; b < prompt.size(); b += chunk) {
      StepPlan plan;
      const size_t e = std::min(prompt.size(), b + chunk);
      add(plan, id, std::vector<int32_t>(prompt.begin() + b, prompt.begin() + e), e == prompt.size());
      auto rows = run(plan);
      if (e == prompt.size()) last = rows.at(0);
    }
    return last;
  }

  void release(int64_t id) { seqs_.erase(id); }

 private:
  struct Seq {
    BlockTable table;
    int32_t pos;
  };
  LocalModelRunner& runner_;
  BlockAllocator allocator_;
  std::map<int64_t, Seq> seqs_;
};

inline int32_t greedy(const std::vector<float>& logits) {
  return argmax_ref(logits.data(), static_cast<int>(logits.size()));
}

}  // namespace conveyor::testing
