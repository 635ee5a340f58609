// CpuModelRunner: the whole model on one rank over the CPU backend, a single StageModel owning all
// layers, with its KV cache in host memory. make_cpu_model_runner (declared in local_model_runner.h)
// builds it from StageOptions; the constructor is public for tests that bring their own weights.
#pragma once

#include <memory>
#include <vector>

#include "stages/backend.h"
#include "stages/kv_cache.h"
#include "stages/local_model_runner.h"
#include "stages/stage_model.h"
#include "stages/stage_options.h"

namespace conveyor {

class CpuModelRunner final : public LocalModelRunner {
 public:
  // ops: the backend (nullptr: the CPU's). Tests pass CUDA ops to run the same model on a GPU; the
  // logits then come back to the host for LocalModelRunner's sampler.
  CpuModelRunner(const ModelSpec& spec, WeightSet&& weights, int num_blocks, int block_size,
                 std::unique_ptr<Ops> ops = nullptr);

  const ModelSpec& spec() const override { return spec_; }
  int num_kv_blocks() const override { return cache_->shape().num_blocks; }
  int block_size() const override { return cache_->shape().block_size; }
  void forward(const StepPlan& plan, std::vector<float>* logits) override;

 private:
  ModelSpec spec_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<StageModel> stage_;
};

// KV blocks for the whole model: opt.num_blocks when > 0, else as many as opt.cpu_kv_cache_space_gib
// hold. Throws when not even one block fits.
int cpu_kv_blocks(const StageOptions& opt, const ModelSpec& spec);

}  // namespace conveyor
