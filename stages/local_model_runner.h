// LocalModelRunner: a whole model on this rank; forward() computes logits and PlanSampler samples them
// right after, so submit() finishes the step and wait() only hands back results in order.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "runtime/engine/model_runner.h"
#include "stages/plan_sampler.h"

namespace conveyor {

// A model on this rank alone: forward() computes logits, sampling happens right after.
class LocalModelRunner : public ModelRunner {
 public:
  // Returns the logits (fp32) as StageModel::run orders them: one row per sequence with wants_logits,
  // then the scored prompt rows, each in plan order.
  virtual void forward(const StepPlan& plan, std::vector<float>* logits) = 0;

  void submit(const StepPlan& plan) override;
  StepResult wait() override;

 private:
  PlanSampler sampler_;
  std::vector<float> logits_;
  std::deque<StepResult> done_;
};

struct StageOptions;
// The CPU reference runner for a whole model on one rank (stages/cpu_model_runner.cpp): weights from
// opt.weights (open_share), KV blocks from opt.num_blocks or opt.cpu_kv_cache_space_gib, block size
// opt.block_size.
std::unique_ptr<LocalModelRunner> make_cpu_model_runner(const StageOptions& opt, const ModelSpec& spec);
}  // namespace conveyor
