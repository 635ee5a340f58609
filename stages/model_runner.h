// ModelRunner: runs forward steps of a model over its paged KV cache. The scheduler and engine see
// only this interface; the CPU reference runner (cpu_model_runner.h) implements it now, the pipeline
// executor and the CUDA runner later.
#pragma once

#include <vector>

#include "runtime/model_spec.h"
#include "stages/step_plan.h"

namespace conveyor {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelSpec& spec() const = 0;
  virtual int num_kv_blocks() const = 0;  // blocks the scheduler may hand out (ids 0..n-1)
  virtual int block_size() const = 0;     // tokens per KV block
  // Runs one step: writes K/V of every new token into the blocks the plan names and returns the
  // logits [plan.num_logits(), vocab] (fp32), one row per sequence with wants_logits, in plan order.
  virtual void forward(const StepPlan& plan, std::vector<float>* logits) = 0;
};

}  // namespace conveyor
