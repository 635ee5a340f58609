// A ModelRunner for scheduler and engine tests that behaves like a real paged-KV model without any
// math: forward() writes each new token into the slot its block table names and reads the whole
// sequence back through the table, so the logits (a hash of every token the sequence holds) change
// when the scheduler mixes up blocks, positions or recompute. Any plan inconsistency throws.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/sampling/sampler.h"
#include "stages/local_model_runner.h"

namespace conveyor::testing {

class FakeModelRunner : public LocalModelRunner {
 public:
  FakeModelRunner(int64_t vocab, int num_blocks, int block_size, std::vector<int64_t> eos = {})
      : num_blocks_(num_blocks), block_size_(block_size), slots_(static_cast<size_t>(num_blocks) * block_size, -1) {
    spec_.vocab = vocab;
    spec_.max_position_embeddings = 4096;
    spec_.eos_token_ids = std::move(eos);
    spec_.source = "fake runner";
  }

  const ModelSpec& spec() const override { return spec_; }
  int num_kv_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }

  void forward(const StepPlan& plan, std::vector<float>* logits) override {
    logits->assign(plan.num_logits() * static_cast<size_t>(spec_.vocab), 0.f);
    plans_.push_back(plan);
    size_t row = 0;
    for (const SeqChunk& c : plan.seqs) {
      const int32_t end = c.start_pos + static_cast<int32_t>(c.tokens.size());
      CONVEYOR_CHECK(static_cast<int64_t>(c.block_table.size()) * block_size_ >= end, "block table too short");
      for (size_t i = 0; i < c.tokens.size(); ++i) slot(c, c.start_pos + static_cast<int32_t>(i)) = c.tokens[i];
      if (!c.wants_logits) continue;
      uint64_t h = 0x1234;
      for (int32_t p = 0; p < end; ++p) {
        int32_t t = slot(c, p);
        CONVEYOR_CHECK(t >= 0, "sequence ", c.seq_id, " reads position ", p, " that was never written");
        h = mix64(h ^ static_cast<uint64_t>(t));
      }
      float* out = logits->data() + row++ * spec_.vocab;
      for (int64_t v = 0; v < spec_.vocab; ++v) out[v] = static_cast<float>(6.0 * sampling_uniform(h, 0, v) - 3.0);
      if (boosted_ >= 0) out[boosted_] += 10.f;
    }
  }

  const std::vector<StepPlan>& plans() const { return plans_; }
  // Makes `token` the most likely next token everywhere (e.g. EOS, to test min_tokens).
  void boost(int32_t token) { boosted_ = token; }

 private:
  int32_t& slot(const SeqChunk& c, int32_t pos) {
    int32_t block = c.block_table.at(static_cast<size_t>(pos / block_size_));
    CONVEYOR_CHECK(block >= 0 && block < num_blocks_, "block id ", block, " outside the pool");
    return slots_[static_cast<size_t>(block) * block_size_ + pos % block_size_];
  }

  ModelSpec spec_;
  int num_blocks_;
  int block_size_;
  std::vector<int32_t> slots_;  // [num_blocks * block_size] token held by each KV slot
  std::vector<StepPlan> plans_;
  int32_t boosted_ = -1;
};

}  // namespace conveyor::testing
