// PlanSampler: the sampling stage's memory of each sequence (seed, sampling parameters, prompt ids when
// a penalty needs them, and every token it has sampled) and the per-plan sampling loop. It lives on
// the rank that holds the LM head (tp rank 0 of the last stage); the leader tells it about sequences
// through the plan (new_seqs when first scheduled, retired when finished), so the sampled history is
// never sent back up the pipeline. Preemption keeps the state: recompute does not change outputs.
// StageSampler is the backend-neutral face the pipeline calls: over host logits (PlanSampler) or,
// on a GPU, over device logits with the same per-sequence state (stages/cuda/cuda_stage_sampler.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "runtime/engine/step_plan.h"
#include "runtime/sampling/sampler.h"
#include "stages/backend.h"

namespace conveyor {

class PlanSampler {
 public:
  struct SeqState {
    uint64_t seed = 0;
    SamplingParams params;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> output_ids;
  };

  // Registers the plan's new sequences and eos ids and forgets its retired ones. Call for every plan,
  // in plan order, before sample().
  void apply(const StepPlan& plan);
  // One result per chunk with wants_logits, in plan order; logits [plan.num_logits(), vocab] fp32.
  StepResult sample(const StepPlan& plan, const float* logits, int64_t vocab);
  size_t num_sequences() const { return seqs_.size(); }

  // For other samplers sharing this bookkeeping: the state of a chunk's sequence (throws when the
  // plan never announced it) and the eos ids of the latest plan that carried them.
  SeqState& state(const StepPlan& plan, const SeqChunk& chunk);
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 private:
  std::unique_ptr<Sampler> sampler_;  // made when the first plan brings the eos ids
  std::vector<int32_t> eos_ids_;
  std::map<int64_t, SeqState> seqs_;
};

// Sampling of one plan's logits, wherever they live.
class StageSampler {
 public:
  virtual ~StageSampler() = default;
  // As PlanSampler::apply: every plan, in order, before sample().
  virtual void apply(const StepPlan& plan) = 0;
  // logits: [plan.num_logits(), vocab] fp32 in the backend's memory (empty when no chunk wants one).
  virtual StepResult sample(const StepPlan& plan, const TensorView& logits) = 0;
};

// The prompt scores of a plan: rows [plan.num_score_rows(), vocab] fp32 on the host (the scored rows
// of StageModel::run, in plan order), one PromptScores per chunk with score rows.
std::vector<PromptScores> score_plan(const StepPlan& plan, const float* rows, int64_t vocab);

// The CPU backend's: PlanSampler over host logits.
std::unique_ptr<StageSampler> make_cpu_stage_sampler(int64_t vocab);

}  // namespace conveyor
