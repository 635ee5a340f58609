// A whole model on one backend (CPU twin or CUDA) as a ModelHarness (model_harness.h), driven like the
// pipeline's last stage: the driver applies each step plan, runs StageModel and samples greedily with
// the backend's stage sampler, returning the tokens and the logits (downloaded) of every row.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/softmax.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model/weights_source.h"
#include "stages/cuda/cuda_stage_sampler.h"
#include "stages/plan_sampler.h"
#include "stages/stage_model.h"
#include "tests/stages/model_harness.h"

namespace conveyor::testing {

// The whole model on one backend, driven like the pipeline's last stage: apply, run, sample (greedy).
class ModelDriver : public ModelHarness {
 public:
  // weights_path: a golden's directory or a GGUF file. The sampler is the backend's (CUDA when ops has a stream).
  // kv_fp8: an FP8 (e4m3) KV cache with the checkpoint's k/v scales, else 1.0 (--kv-cache-dtype fp8).
  ModelDriver(const ModelSpec& spec, const std::string& weights_path, std::unique_ptr<Ops> ops, bool kv_fp8 = false)
      : spec_(spec), ops_(std::move(ops)), book_(kBlocks, 16) {
    PagedKvShape shape;
    shape.num_blocks = kBlocks;
    shape.block_size = 16;
    shape.n_kv_heads = static_cast<int>(spec_.kv_heads);
    shape.head_dim = static_cast<int>(spec_.head_dim);
    cache_ = ops_->make_kv_cache(0, static_cast<int>(spec_.layers), shape, kv_fp8);
    const WeightShare share = WeightShare::whole_model(spec_);
    WeightSet weights = WeightLoader(spec_, open_weight_source(weights_path)).load_share(share);
    model_ = std::make_unique<StageModel>(spec_, share, std::move(weights), *ops_, *cache_, nullptr);
    // 4 rows: bigger plans loop.
    sampler_ = ops_->stream() ? make_cuda_stage_sampler(ops_->stream(), spec_.vocab, 4) : make_cpu_stage_sampler(spec_.vocab);
  }

  // Adds the next tokens of sequence id (announced to the sampler on first use, greedy).
  void add(StepPlan& plan, int64_t id, const std::vector<int32_t>& tokens, bool wants_logits) override {
    if (!book_.add(plan, id, tokens, wants_logits)) return;
    NewSequence n;
    n.seq_id = id;
    n.seed = static_cast<uint64_t>(id);
    n.params.temperature = 0;
    plan.new_seqs.push_back(n);
  }
  void release(int64_t id) override { book_.release(id); }
  const KvCache& kv_cache() const { return *cache_; }
  // cache.calculate_kv_scales: the next step's K and V give the FP8 cache's scales.
  void calculate_kv_scales() { model_->calculate_kv_scales(); }
  // runtime.gemm_warmup (StageModel::warm_up_gemms).
  int64_t warm_up_gemms(int64_t max_tokens, int64_t max_logit_rows) {
    return model_->warm_up_gemms(max_tokens, max_logit_rows);
  }

  StepOutput step(StepPlan plan) override {
    StepOutput out;
    out.tokens = run(std::move(plan), &out.logits);
    return out;
  }

  // Runs the plan; returns the sampled tokens and the device logits (downloaded), in plan order.
  std::vector<int32_t> run(StepPlan plan, std::vector<std::vector<float>>* logits_rows) {
    plan.step = step_++;
    if (plan.step == 0) plan.eos_ids = {0};
    sampler_->apply(plan);
    Tensor logits;
    model_->run(plan, Tensor(), &logits);
    const StepResult r = sampler_->sample(plan, logits.view());
    std::vector<float> host(static_cast<size_t>(logits.view().numel()));
    if (!host.empty()) ops_->download(logits.view(), host.data());
    const size_t vocab = static_cast<size_t>(spec_.vocab);
    std::vector<int32_t> tokens;
    logits_rows->clear();
    for (size_t i = 0; i < r.samples.size(); ++i) {
      tokens.push_back(r.samples[i].token);
      logits_rows->emplace_back(host.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                host.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
      // The device sampler and the host argmax read the same logits: exactly the same token.
      EXPECT_EQ(tokens.back(), argmax_ref(logits_rows->back().data(), static_cast<int>(vocab)))
          << "step " << plan.step << " row " << i;
    }
    EXPECT_EQ(tokens.size(), plan.num_logits());
    return tokens;
  }

 private:
  static constexpr int kBlocks = 256;
  ModelSpec spec_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<StageSampler> sampler_;
  PlanBook book_;
  int64_t step_ = 0;
};

}  // namespace conveyor::testing
