// PlanSampler (see plan_sampler.h).
#include "stages/plan_sampler.h"

#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

void PlanSampler::apply(const StepPlan& plan) {
  if (!sampler_ || !plan.eos_ids.empty()) {
    sampler_ = std::make_unique<Sampler>(plan.eos_ids);
    eos_ids_ = plan.eos_ids;
  }
  for (const NewSequence& n : plan.new_seqs) {
    SeqState& s = seqs_[n.seq_id];
    s = SeqState{n.seed, n.params, n.prompt_ids, {}};
  }
  for (int64_t id : plan.retired) seqs_.erase(id);
}

PlanSampler::SeqState& PlanSampler::state(const StepPlan& plan, const SeqChunk& chunk) {
  auto it = seqs_.find(chunk.seq_id);
  CONVEYOR_CHECK(it != seqs_.end(), "step ", plan.step, ": sequence ", chunk.seq_id,
                 " wants a token but the sampling stage was never told about it (a plan was lost or reordered)");
  return it->second;
}

StepResult PlanSampler::sample(const StepPlan& plan, const float* logits, int64_t vocab) {
  StepResult result;
  result.step = plan.step;
  size_t row = 0;
  for (const SeqChunk& c : plan.seqs) {
    if (!c.wants_logits) continue;
    SeqState& s = state(plan, c);
    SequenceView view{s.prompt_ids, s.output_ids, s.seed};
    result.samples.push_back(sampler_->sample(logits + row * vocab, vocab, view, s.params));
    s.output_ids.push_back(result.samples.back().token);
    ++row;
  }
  return result;
}

std::vector<PromptScores> score_plan(const StepPlan& plan, const float* rows, int64_t vocab) {
  std::vector<PromptScores> out;
  std::vector<int32_t> targets;
  for (const SeqChunk& c : plan.seqs) {
    const ChunkScoring& sc = c.score;
    if (sc.rows == 0) continue;
    targets.clear();
    for (int32_t r = sc.first_row; r < sc.first_row + sc.rows; ++r)
      targets.push_back(r + 1 < static_cast<int32_t>(c.tokens.size()) ? c.tokens[static_cast<size_t>(r) + 1] : sc.next_token);
    PromptScores s;
    s.seq_id = c.seq_id;
    s.first_pos = c.start_pos + sc.first_row;
    score_logit_rows(rows, sc.rows, vocab, targets.data(), sc.top, sc.full, &s);
    rows += static_cast<int64_t>(sc.rows) * vocab;
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

class CpuStageSampler final : public StageSampler {
 public:
  explicit CpuStageSampler(int64_t vocab) : vocab_(vocab) {}
  void apply(const StepPlan& plan) override { sampler_.apply(plan); }
  StepResult sample(const StepPlan& plan, const TensorView& logits) override {
    const int64_t rows = static_cast<int64_t>(plan.num_logits());
    CONVEYOR_CHECK(rows == 0 || (logits.dtype == DType::kF32 && logits.rows == rows && logits.cols == vocab_),
                   "step ", plan.step, ": logits are [", logits.rows, ", ", logits.cols, "] ",
                   dtype_name(logits.dtype), ", expected [", rows, ", ", vocab_, "] f32");
    return sampler_.sample(plan, logits.f32(), vocab_);
  }

 private:
  int64_t vocab_;
  PlanSampler sampler_;
};

}  // namespace

std::unique_ptr<StageSampler> make_cpu_stage_sampler(int64_t vocab) { return std::make_unique<CpuStageSampler>(vocab); }

}  // namespace conveyor
