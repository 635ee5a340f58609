// Decode steps through CUDA graphs (stages/decode_graphs.h) against the same steps run eagerly, on one
// StageModel and one CudaOps (so the GEMM algorithms are the same): prefill eagerly, run K teacher-
// forced decode steps with graphs off, then the SAME steps again with graphs on (the KV rows they
// rewrite get the same values). At a bucket size (1, 4 sequences) the graphs run the same kernels in
// the same order, so every logit must match within 1e-6 and the argmax tokens exactly. Block size 4
// makes the tables outgrow their stride mid-run, so a second graph is captured for a longer stride.
// Three sequences pad to the bucket of 4: a different GEMM shape, so only a bf16/f16-level bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/softmax.h"
#include "runtime/engine/block_allocator.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model/weights_source.h"
#include "stages/cuda/cuda_ops.h"
#include "stages/stage_model.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

constexpr int kBlockSize = 4;
constexpr int kBlocks = 512;
constexpr int kDecodeSteps = 40;

class GraphModel {
 public:
  GraphModel(const std::string& name, DType dt) : allocator_(kBlocks) {
    const std::string dir = testing::data_path("goldens/" + name);
    spec_ = load_model_spec(dir);
    std::ifstream in(dir + "/golden.json");
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& p : doc["prompts"]) prompts_.push_back(p["prompt_ids"].get<std::vector<int32_t>>());
    ops_ = make_cuda_ops(0, dt);
    PagedKvShape shape;
    shape.num_blocks = kBlocks;
    shape.block_size = kBlockSize;
    shape.n_kv_heads = static_cast<int>(spec_.kv_heads);
    shape.head_dim = static_cast<int>(spec_.head_dim);
    cache_ = ops_->make_kv_cache(0, static_cast<int>(spec_.layers), shape);
    const WeightShare share = WeightShare::whole_model(spec_);
    WeightSet weights = WeightLoader(spec_, open_weight_source(dir)).load_share(share);
    model_ = std::make_unique<StageModel>(spec_, share, std::move(weights), *ops_, *cache_, nullptr);
  }

  int vocab() const { return static_cast<int>(spec_.vocab); }
  StageModel& model() { return *model_; }

  // Prefills prompts `which` (eagerly: a mixed plan) and returns K decode plans over them with
  // random teacher-forced tokens; their block tables are reserved now, so the plans can run twice.
  std::vector<StepPlan> prefill_and_plan(const std::vector<size_t>& which, uint64_t seed) {
    StepPlan pre;
    std::vector<int32_t> pos;
    for (size_t p : which) {
      tables_.emplace_back(allocator_, kBlockSize);
      EXPECT_EQ(tables_.back().append(static_cast<int>(prompts_[p].size())), AppendResult::kOk);
      pre.seqs.push_back(SeqChunk{static_cast<int64_t>(tables_.size()), 0, prompts_[p], tables_.back().blocks(), true, {}});
      pos.push_back(static_cast<int32_t>(prompts_[p].size()));
    }
    std::vector<float> logits;
    model_->forward(pre, Tensor(), &logits);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> tok(0, vocab() - 1);
    std::vector<StepPlan> plans;
    for (int k = 0; k < kDecodeSteps; ++k) {
      StepPlan plan;
      plan.step = k + 1;
      for (size_t i = 0; i < which.size(); ++i) {
        BlockTable& t = tables_[tables_.size() - which.size() + i];
        EXPECT_EQ(t.append(1), AppendResult::kOk);
        plan.seqs.push_back(SeqChunk{static_cast<int64_t>(tables_.size() - which.size() + i + 1), pos[i], {tok(rng)},
                                     t.blocks(), true, {}});
        ++pos[i];
      }
      plans.push_back(plan);
    }
    return plans;
  }

  std::vector<std::vector<float>> run_all(const std::vector<StepPlan>& plans, bool graphs) {
    model_->set_graphs(graphs);
    std::vector<std::vector<float>> out;
    for (const StepPlan& plan : plans) {
      out.emplace_back();
      model_->forward(plan, Tensor(), &out.back());
      EXPECT_EQ(out.back().size(), plan.seqs.size() * static_cast<size_t>(vocab()));
    }
    return out;
  }

 private:
  ModelSpec spec_;
  std::vector<std::vector<int32_t>> prompts_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<StageModel> model_;
  BlockAllocator allocator_;
  std::vector<BlockTable> tables_;
};

// Every logit within tol * max(1, max |eager|) (tol 1e-6: identical up to printing), argmax equal.
void expect_same(const std::vector<std::vector<float>>& eager, const std::vector<std::vector<float>>& graph,
                 int vocab, float tol, bool same_tokens) {
  ASSERT_EQ(eager.size(), graph.size());
  for (size_t s = 0; s < eager.size(); ++s) {
    ASSERT_EQ(eager[s].size(), graph[s].size()) << "step " << s;
    float scale = 1.f;
    for (float x : eager[s]) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < eager[s].size(); ++i) {
      ASSERT_TRUE(std::isfinite(graph[s][i])) << "step " << s << " logit " << i;
      ASSERT_LE(std::fabs(graph[s][i] - eager[s][i]), tol * scale)
          << "step " << s << " row " << i / vocab << " logit " << i % vocab << ": graph " << graph[s][i]
          << ", eager " << eager[s][i];
    }
    if (!same_tokens) continue;
    for (size_t r = 0; r * vocab < eager[s].size(); ++r)
      EXPECT_EQ(argmax_ref(eager[s].data() + r * vocab, vocab), argmax_ref(graph[s].data() + r * vocab, vocab))
          << "step " << s << " row " << r;
  }
}

class CudaGraphs : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CudaGraphs, BucketSizedDecodeIsIdenticalToEager) {
  GraphModel m(std::get<0>(GetParam()), std::get<1>(GetParam()));
  for (const std::vector<size_t>& which : {std::vector<size_t>{1}, std::vector<size_t>{0, 1, 2, 3}}) {
    SCOPED_TRACE(std::to_string(which.size()) + " sequences");
    const std::vector<StepPlan> plans = m.prefill_and_plan(which, 7 + which.size());
    const size_t before = m.model().num_graphs();
    const auto eager = m.run_all(plans, false);
    EXPECT_EQ(m.model().num_graphs(), before) << "graphs off must not capture";
    const auto graph = m.run_all(plans, true);
    // Two strides at least: the tables outgrow the first one during the 40 steps.
    EXPECT_GE(m.model().num_graphs(), before + 2);
    expect_same(eager, graph, m.vocab(), 1e-6f, true);
  }
}

TEST_P(CudaGraphs, PaddedDecodeStaysCloseToEager) {
  GraphModel m(std::get<0>(GetParam()), std::get<1>(GetParam()));
  const std::vector<StepPlan> plans = m.prefill_and_plan({0, 2, 3}, 99);
  const auto eager = m.run_all(plans, false);
  const auto graph = m.run_all(plans, true);
  EXPECT_GE(m.model().num_graphs(), 1u);
  // Three rows pad to four: another GEMM shape may round differently, never by more than this.
  const float tol = std::get<1>(GetParam()) == DType::kBF16 ? 0.05f : 0.01f;
  expect_same(eager, graph, m.vocab(), tol, false);
}

std::string case_name(const ::testing::TestParamInfo<CudaGraphs::ParamType>& info) {
  return std::get<0>(info.param) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Goldens, CudaGraphs,
                         ::testing::Combine(::testing::Values("llama3_rope", "qwen2_tied_mqa", "mistral_swa",
                                                              "llama_hd128"),
                                            ::testing::Values(DType::kBF16, DType::kF16)),
                         case_name);

}  // namespace
}  // namespace conveyor
