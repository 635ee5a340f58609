// ModelRunner: runs forward steps of a model over its paged KV cache. The scheduler and engine see
// only this interface; the CPU reference runner (cpu_model_runner.h) implements it now, the pipeline
// executor and the CUDA runner later.
#pragma once

#include <memory>
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

namespace conveyor {
class Config;
// The CPU reference runner for a whole model on one rank (stages/cpu_model_runner.cpp): spec and
// weights from cfg (model.path / model.config, model.load_format), KV blocks from cache.num_blocks or
// cache.cpu_kv_cache_space, block size cache.block_size.
std::unique_ptr<ModelRunner> make_cpu_model_runner(const Config& cfg, const ModelSpec& spec);
}  // namespace conveyor
