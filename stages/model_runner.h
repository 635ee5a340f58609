// ModelRunner: runs forward steps of a model over its paged KV cache and samples the next tokens. The
// engine sees only this interface: it submits plans (up to max_in_flight() at once: the pipeline's
// micro-batches) and waits for their results in submission order. LocalModelRunner is a whole model
// on one rank (CPU reference runner, test fakes); the pipeline runner (pipeline_stage.h) spreads it
// over ranks and samples on the last stage.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "runtime/model_spec.h"
#include "stages/plan_sampler.h"
#include "stages/step_plan.h"

namespace conveyor {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelSpec& spec() const = 0;
  virtual int num_kv_blocks() const = 0;  // blocks the scheduler may hand out (ids 0..n-1)
  virtual int block_size() const = 0;     // tokens per KV block
  virtual int max_in_flight() const { return 1; }
  // Starts one step: writes K/V of every new token into the blocks the plan names and samples a token
  // for each chunk with wants_logits. May return before the step is done.
  virtual void submit(const StepPlan& plan) = 0;
  // The result of the oldest submitted plan (blocks until it is there).
  virtual StepResult wait() = 0;
  // Ends the run (the pipeline tells its other ranks to stop); idempotent.
  virtual void shutdown() {}
};

// A model on this rank alone: forward() computes logits, sampling happens right after.
class LocalModelRunner : public ModelRunner {
 public:
  // Returns the logits [plan.num_logits(), vocab] (fp32), one row per sequence with wants_logits, in plan order.
  virtual void forward(const StepPlan& plan, std::vector<float>* logits) = 0;

  void submit(const StepPlan& plan) override;
  StepResult wait() override;

 private:
  PlanSampler sampler_;
  std::vector<float> logits_;
  std::deque<StepResult> done_;
};

}  // namespace conveyor

namespace conveyor {
class Config;
// The CPU reference runner for a whole model on one rank (stages/cpu_model_runner.cpp): spec and
// weights from cfg (model.path / model.config, model.load_format), KV blocks from cache.num_blocks or
// cache.cpu_kv_cache_space, block size cache.block_size.
std::unique_ptr<LocalModelRunner> make_cpu_model_runner(const Config& cfg, const ModelSpec& spec);
}  // namespace conveyor
