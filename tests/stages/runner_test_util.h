// The CPU runner (a LocalModelRunner) as a ModelHarness (model_harness.h), driven the way the
// scheduler will: plans of prefill chunks and decode tokens, greedy choice by argmax (lowest id on
// ties). Shared by the golden, SmolLM2, CPU runner, tensor-parallel and pipeline tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/softmax.h"
#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "stages/local_model_runner.h"
#include "tests/stages/model_harness.h"

namespace conveyor::testing {

inline Config runner_config(const std::string& model_path, int num_blocks, int block_size = 16) {
  Config cfg;
  cfg.set("model.path", model_path, "test");
  cfg.set("cache.num_blocks", std::to_string(num_blocks), "test");
  cfg.set("cache.block_size", std::to_string(block_size), "test");
  return cfg;
}

inline int32_t greedy(const std::vector<float>& logits) {
  return argmax_ref(logits.data(), static_cast<int>(logits.size()));
}

class Driver : public ModelHarness {
 public:
  explicit Driver(LocalModelRunner& runner) : runner_(runner), book_(runner.num_kv_blocks(), runner.block_size()) {}

  // Adds the next `tokens` of sequence `id` to `plan` (creating the sequence on first use).
  void add(StepPlan& plan, int64_t id, const std::vector<int32_t>& tokens, bool wants_logits) override {
    book_.add(plan, id, tokens, wants_logits);
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

  StepOutput step(StepPlan plan) override {
    StepOutput out;
    out.logits = run(plan);
    for (const std::vector<float>& row : out.logits) out.tokens.push_back(greedy(row));
    return out;
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

  void release(int64_t id) override { book_.release(id); }

 private:
  LocalModelRunner& runner_;
  PlanBook book_;
};

}  // namespace conveyor::testing
