// PlanSampler: the sampling stage's memory of each sequence (seed, sampling parameters, prompt ids when
// a penalty needs them, and every token it has sampled) and the per-plan sampling loop. It lives on
// the rank that holds the LM head (tp rank 0 of the last stage); the leader tells it about sequences
// through the plan (new_seqs when first scheduled, retired when finished), so the sampled history is
// never sent back up the pipeline. Preemption keeps the state: recompute does not change outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "runtime/sampler.h"
#include "stages/step_plan.h"

namespace conveyor {

class PlanSampler {
 public:
  // Registers the plan's new sequences and eos ids and forgets its retired ones. Call for every plan,
  // in plan order, before sample().
  void apply(const StepPlan& plan);
  // One result per chunk with wants_logits, in plan order; logits [plan.num_logits(), vocab] fp32.
  StepResult sample(const StepPlan& plan, const float* logits, int64_t vocab);
  size_t num_sequences() const { return seqs_.size(); }

 private:
  struct SeqState {
    uint64_t seed = 0;
    SamplingParams params;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> output_ids;
  };
  std::unique_ptr<Sampler> sampler_;  // made when the first plan brings the eos ids
  std::map<int64_t, SeqState> seqs_;
};

}  // namespace conveyor
