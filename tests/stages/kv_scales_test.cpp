// cache.calculate_kv_scales on the CPU backend over the tiny ct_channel FP8 checkpoint (GQA: 6 query
// heads over 2 KV heads): the first step sets every layer's scales to kv_scales_from_amax of the largest
// |K| and |V| that layer's fused projection produced in that step (recorded here independently, from the
// qkv tensor the attention receives), later steps keep them, and the step runs eagerly; a 16-bit cache
// ignores the request. kv_scales_from_amax: amax / 200 and amax / 100, 1.0 for a zero or non-finite amax.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/spec.h"
#include "tests/stages/forwarding_ops.h"
#include "tests/stages/model_driver.h"
#include "tests/support/test_support.h"

namespace conveyor::testing {
namespace {

// Records, per qkv_attention call, the largest |K| and |V| of its qkv tensor.
class RecordingOps final : public ForwardingOps {
 public:
  struct Amax {
    float k = 0, v = 0;
  };
  std::vector<Amax>* calls;
  explicit RecordingOps(std::vector<Amax>* out) : calls(out) {}
  void qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache, const AttentionConfig& cfg,
                     const RopeParams& rope_params) override {
    const int64_t q = static_cast<int64_t>(cfg.n_heads) * cfg.head_dim, kv = static_cast<int64_t>(cfg.n_kv_heads) * cfg.head_dim;
    Amax a;
    for (int64_t r = 0; r < qkv.rows; ++r)
      for (int64_t c = 0; c < kv; ++c) {
        a.k = std::max(a.k, std::fabs(qkv.f32()[r * qkv.cols + q + c]));
        a.v = std::max(a.v, std::fabs(qkv.f32()[r * qkv.cols + q + kv + c]));
      }
    calls->push_back(a);
    ForwardingOps::qkv_attention(out, qkv, cache, cfg, rope_params);
  }
};

std::vector<std::vector<int32_t>> prompts() {
  std::ifstream in(data_path("fp8/reference.json"));
  auto ps = nlohmann::json::parse(in)["prompts"].get<std::vector<std::vector<int32_t>>>();
  ps.resize(3);
  return ps;
}

TEST(KvScales, FromAmax) {
  const KvScales s = kv_scales_from_amax(20.f, 3.f);
  EXPECT_FLOAT_EQ(s.k, 0.1f);
  EXPECT_FLOAT_EQ(s.v, 0.03f);
  EXPECT_EQ(kv_scales_from_amax(0.f, NAN).k, 1.f);
  EXPECT_EQ(kv_scales_from_amax(0.f, NAN).v, 1.f);
}

TEST(KvScales, TheFirstStepsKeysAndValuesSetEveryLayersScales) {
  const std::string dir = data_path("fp8/ct_channel");
  const ModelSpec spec = load_model_spec(dir);
  std::vector<RecordingOps::Amax> calls;
  ModelDriver d(spec, dir, std::make_unique<RecordingOps>(&calls), /*kv_fp8=*/true);
  d.calculate_kv_scales();
  const auto ps = prompts();
  StepPlan first;
  d.add(first, 1, ps[0], true);
  d.add(first, 2, ps[1], true);
  d.step(std::move(first));
  const size_t layers = static_cast<size_t>(spec.layers);
  ASSERT_EQ(calls.size(), layers);  // one eager step, every layer once
  std::vector<KvScales> after_first;
  for (size_t l = 0; l < layers; ++l) {
    const KvScales want = kv_scales_from_amax(calls[l].k, calls[l].v), got = d.kv_cache().scales(static_cast<int>(l));
    EXPECT_FLOAT_EQ(got.k, want.k) << "layer " << l;
    EXPECT_FLOAT_EQ(got.v, want.v) << "layer " << l;
    EXPECT_NE(got.k, 1.f) << "layer " << l;
    EXPECT_GT(calls[l].k, 0.f);
    after_first.push_back(got);
  }
  for (int t = 0; t < 4; ++t) {  // decode steps, and a new sequence's prefill: the scales stay
    StepPlan next;
    d.add(next, 1, {5}, true);
    if (t == 2) d.add(next, 3, ps[2], true);
    d.step(std::move(next));
  }
  EXPECT_EQ(calls.size(), 5 * layers);
  for (size_t l = 0; l < layers; ++l) {
    EXPECT_EQ(d.kv_cache().scales(static_cast<int>(l)).k, after_first[l].k);
    EXPECT_EQ(d.kv_cache().scales(static_cast<int>(l)).v, after_first[l].v);
  }
}

TEST(KvScales, ASixteenBitCacheIgnoresTheRequest) {
  const std::string dir = data_path("fp8/ct_channel");
  const ModelSpec spec = load_model_spec(dir);
  ModelDriver d(spec, dir, make_cpu_ops(), /*kv_fp8=*/false);
  d.calculate_kv_scales();
  StepPlan first;
  d.add(first, 1, prompts()[0], true);
  d.step(std::move(first));
  EXPECT_EQ(d.kv_cache().scales(0).k, 1.f);
}

}  // namespace
}  // namespace conveyor::testing
