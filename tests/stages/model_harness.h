// The one test harness of the model tests on every backend: a ModelHarness runs step plans (the CPU
// runner in runner_test_util.h, StageModel on any Ops in model_driver.h), PlanBook gives each sequence
// its KV blocks and positions, and greedy_alone / greedy_batched are the decode loops both the CPU and
// the GPU tests run. The tests then differ only in the backend and in how they compare (exact, golden
// tolerance, or the tie rule of gpu_tie_rule.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/engine/block_allocator.h"
#include "runtime/engine/step_plan.h"

namespace conveyor::testing {

// Per sequence a BlockTable from one allocator and the next position, as the scheduler keeps them.
class PlanBook {
 public:
  PlanBook(int num_blocks, int block_size) : allocator_(num_blocks), block_size_(block_size) {}

  // Appends the next `tokens` of sequence `id` to `plan`; true when `id` was new.
  bool add(StepPlan& plan, int64_t id, const std::vector<int32_t>& tokens, bool wants_logits) {
    auto it = seqs_.find(id);
    const bool fresh = it == seqs_.end();
    if (fresh) it = seqs_.emplace(id, Seq{BlockTable(allocator_, block_size_), 0}).first;
    Seq& s = it->second;
    CONVEYOR_CHECK(s.table.append(static_cast<int>(tokens.size())) == AppendResult::kOk,
                   "test ran out of KV blocks adding ", tokens.size(), " tokens to sequence ", id);
    plan.seqs.push_back(SeqChunk{id, s.pos, tokens, s.table.blocks(), wants_logits, {}});
    s.pos += static_cast<int32_t>(tokens.size());
    return fresh;
  }
  void release(int64_t id) { seqs_.erase(id); }  // its blocks go back to the allocator

 private:
  struct Seq {
    BlockTable table;
    int32_t pos;
  };
  BlockAllocator allocator_;
  int block_size_;
  std::map<int64_t, Seq> seqs_;
};

// One row per sequence of the plan that wanted logits, in plan order: the greedy token and the fp32
// logits (downloaded from the device on a GPU backend) that chose it.
struct StepOutput {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

class ModelHarness {
 public:
  virtual ~ModelHarness() = default;
  virtual void add(StepPlan& plan, int64_t id, const std::vector<int32_t>& tokens, bool wants_logits) = 0;
  virtual StepOutput step(StepPlan plan) = 0;
  virtual void release(int64_t id) = 0;
};

// One prompt's greedy run: its tokens and, per token, the logits that chose it.
struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

// Wall time of the decode steps (all but each sequence's prefill) and the tokens they produced.
struct DecodeTiming {
  double seconds = 0;
  int tokens = 0;
};

inline void record_step(std::vector<GreedyRun>& runs, const std::vector<size_t>& order, StepOutput&& out) {
  ASSERT_EQ(out.tokens.size(), order.size()) << "one token per sequence that wanted logits";
  ASSERT_EQ(out.logits.size(), order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    runs[order[r]].tokens.push_back(out.tokens[r]);
    runs[order[r]].logits.push_back(std::move(out.logits[r]));
  }
}

// Each prompt on its own (sequence ids first_id + p, released after): a whole prefill, then greedy
// decode steps until n tokens. With `forced` (greedy_forced), each decode step feeds forced[p]'s token of the
// step before instead of the run's own, and the run takes forced[p].size() tokens.
inline std::vector<GreedyRun> greedy_alone(ModelHarness& h, const std::vector<std::vector<int32_t>>& prompts, int n,
                                           DecodeTiming* timing = nullptr, int64_t first_id = 1,
                                           const std::vector<std::vector<int32_t>>* forced = nullptr) {
  std::vector<GreedyRun> runs(prompts.size());
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t id = first_id + static_cast<int64_t>(p);
    const size_t want = forced ? (*forced)[p].size() : static_cast<size_t>(n);
    StepPlan plan;
    h.add(plan, id, prompts[p], true);
    record_step(runs, {p}, h.step(std::move(plan)));
    const auto t0 = std::chrono::steady_clock::now();
    while (!::testing::Test::HasFatalFailure() && !runs[p].tokens.empty() && runs[p].tokens.size() < want) {
      StepPlan next;
      h.add(next, id, {forced ? (*forced)[p][runs[p].tokens.size() - 1] : runs[p].tokens.back()}, true);
      record_step(runs, {p}, h.step(std::move(next)));
      if (timing) ++timing->tokens;
    }
    if (timing) timing->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    h.release(id);
  }
  return runs;
}

// Teacher-forced: run p's token i is what this backend picks after the prompt and forced[p][0..i) (the
// reference's path), so every step is compared on the same prefix and one difference does not move the steps
// after it (check_forced in gpu_tie_rule.h).
inline std::vector<GreedyRun> greedy_forced(ModelHarness& h, const std::vector<std::vector<int32_t>>& prompts,
                                            const std::vector<std::vector<int32_t>>& forced, int64_t first_id = 1) {
  return greedy_alone(h, prompts, 0, nullptr, first_id, &forced);
}

// All prompts side by side (sequence ids 0..): prompt p is prefilled in chunks of chunks[p] tokens
// (0 or chunks empty: whole; only the last chunk wants logits) while the prompts already prefilled
// decode, so steps mix prefill chunks and decode tokens; each sequence stops at n tokens.
inline std::vector<GreedyRun> greedy_batched(ModelHarness& h, const std::vector<std::vector<int32_t>>& prompts, int n,
                                             const std::vector<size_t>& chunks = {},
                                             DecodeTiming* timing = nullptr) {
  std::vector<GreedyRun> runs(prompts.size());
  std::vector<size_t> fed(prompts.size(), 0);
  for (;;) {
    StepPlan plan;
    std::vector<size_t> order;  // the prompt of each logits row
    bool decode_only = true;
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<int32_t>& prompt = prompts[p];
      if (fed[p] < prompt.size()) {
        const size_t chunk = chunks.empty() || chunks[p] == 0 ? prompt.size() : chunks[p];
        const size_t e = std::min(prompt.size(), fed[p] + chunk);
        h.add(plan, static_cast<int64_t>(p), std::vector<int32_t>(prompt.begin() + fed[p], prompt.begin() + e),
              e == prompt.size());
        if (e == prompt.size()) order.push_back(p);
        fed[p] = e;
        decode_only = false;
      } else if (!runs[p].tokens.empty() && runs[p].tokens.size() < static_cast<size_t>(n)) {
        h.add(plan, static_cast<int64_t>(p), {runs[p].tokens.back()}, true);
        order.push_back(p);
      }
    }
    if (plan.seqs.empty()) break;
    const auto t0 = std::chrono::steady_clock::now();
    StepOutput out = h.step(std::move(plan));
    if (timing && decode_only) {
      timing->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      timing->tokens += static_cast<int>(order.size());
    }
    record_step(runs, order, std::move(out));
    if (::testing::Test::HasFatalFailure()) break;
  }
  return runs;
}

}  // namespace conveyor::testing
