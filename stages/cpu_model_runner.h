// CpuModelRunner: the whole model on one rank over the CPU backend, a single StageModel owning all
// layers, with its KV cache in host memory. make_cpu_model_runner (declared in local_model_runner.h)
// builds it from StageOptions; the constructor is public for tests that bring their own weights.
#pragma once

#include <memory>
#include <string>
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
  // kv_fp8: the KV cache holds e4m3 codes with the checkpoint's per-tensor scales (else 1.0).
  CpuModelRunner(const ModelSpec& spec, WeightSet&& weights, int num_blocks, int block_size,
                 std::unique_ptr<Ops> ops = nullptr, bool kv_fp8 = false);

  const ModelSpec& spec() const override { return spec_; }
  int num_kv_blocks() const override { return cache_->shape().num_blocks; }
  int block_size() const override { return cache_->shape().block_size; }
  void forward(const StepPlan& plan, std::vector<float>* logits) override;
  const KvCache& kv_cache() const { return *cache_; }
  // describe_kv_cache of the runner's cache ("" for a plain one).
  std::string kv_cache_line() const { return stage_->kv_cache_line(); }
  // cache.calculate_kv_scales (StageModel::calculate_kv_scales).
  void calculate_kv_scales() { stage_->calculate_kv_scales(); }

 private:
  ModelSpec spec_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<StageModel> stage_;
};

// KV blocks of `layers` layers of `kv` (its heads and head_dim, block_size from opt) on the CPU backend:
// opt.num_blocks when > 0, else as many as opt.cpu_kv_cache_space_gib hold at fp32 (FP8: one byte) per
// element. Throws naming `what` (the model, a stage) when not even one block fits.
int cpu_kv_blocks(const StageOptions& opt, int layers, const PagedKvShape& kv, const std::string& what);

}  // namespace conveyor
