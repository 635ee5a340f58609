// ModelRunner: runs forward steps of a model over its paged KV cache and samples the next tokens. The
// engine sees only this interface: it submits plans (up to max_in_flight() at once: the pipeline's
// micro-batches) and waits for their results in submission order. The stages implement it:
// LocalModelRunner (stages/local_model_runner.h) is a whole model on one rank (CPU reference runner,
// test fakes); the pipeline runner (stages/pipeline_stage.h) spreads it over ranks and samples on the
// last stage.
#pragma once

#include "runtime/engine/step_plan.h"
#include "runtime/model/spec.h"

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

}  // namespace conveyor
