// --kv-cache-dtype fp8 end to end on the CPU backend, over the tiny FP8 checkpoints of
// scripts/make_fp8_checkpoints.py: ct_kv's per-layer k_scale/v_scale (llm-compressor's kv_cache_scheme)
// reach the cache, a checkpoint without them runs with 1.0, a checkpoint with them still loads with a
// 16-bit/fp32 cache (scales unused, ids unchanged), and greedy ids with FP8 K/V stay close to the same
// run with fp32 K/V (counts printed: the acceptance asks for them). GQA: 6 query heads over 2 KV heads.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/spec.h"
#include "runtime/model/weights_source.h"
#include "stages/cpu_model_runner.h"
#include "stages/stage_options.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using Ids = std::vector<std::vector<int32_t>>;

const nlohmann::json& reference() {
  static const nlohmann::json ref = [] {
    std::ifstream in(testing::data_path("fp8/reference.json"));
    return nlohmann::json::parse(in);
  }();
  return ref;
}

std::unique_ptr<LocalModelRunner> runner(const std::string& layout, const std::string& kv_dtype) {
  const std::string dir = testing::data_path("fp8/" + layout);
  Config cfg = testing::runner_config(dir, 64);
  cfg.set("cache.kv_cache_dtype", kv_dtype, "test");
  return make_cpu_model_runner(StageOptions::from_config(cfg), load_model_spec(dir));
}

Ids generate(LocalModelRunner& r) {
  testing::Driver d(r);
  Ids out;
  for (const testing::GreedyRun& g :
       testing::greedy_alone(d, reference()["prompts"].get<Ids>(), reference()["new_tokens"].get<int>()))
    out.push_back(g.tokens);
  return out;
}

// Tokens equal before the first difference, and whole prompts equal; printed.
int compare(const Ids& got, const Ids& want, const std::string& what) {
  size_t lead = 0, total = 0;
  int same = 0;
  for (size_t p = 0; p < want.size(); ++p) {
    size_t i = 0;
    while (i < want[p].size() && got.at(p).at(i) == want[p][i]) ++i;
    lead += i;
    total += want[p].size();
    same += i == want[p].size();
  }
  std::cout << what << ": " << same << " of " << want.size() << " prompts identical, " << lead << " of " << total
            << " tokens equal before the first difference\n";
  return same;
}

// Teacher forcing: runs `r` over each prompt followed by the reference's own ids and counts the steps
// whose top token is the reference's next id (chaos-free: no step sees the run's earlier choices).
double same_top_share(LocalModelRunner& r, const Ids& want, const std::string& what) {
  testing::Driver d(r);
  const Ids prompts = reference()["prompts"].get<Ids>();
  size_t same = 0, total = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t id = static_cast<int64_t>(p) + 1;
    int32_t top = testing::greedy(d.prefill(id, prompts[p]));
    for (size_t i = 0; i < want[p].size(); ++i) {
      same += top == want[p][i];
      ++total;
      StepPlan plan;
      d.add(plan, id, {want[p][i]}, true);
      top = testing::greedy(d.run(plan).at(0));
    }
    d.release(id);
  }
  std::cout << what << ": same top token at " << same << " of " << total << " teacher-forced steps\n";
  return static_cast<double>(same) / static_cast<double>(total);
}

float file_scale(const std::string& layout, const std::string& name) {
  float x = 0;
  open_weight_source(testing::data_path("fp8/" + layout))->read_range(name, 0, 1, &x);
  return x;
}

TEST(Fp8KvCache, CheckpointScalesReachTheCache) {
  auto r = runner("ct_kv", "fp8");
  const auto& cpu = dynamic_cast<const CpuModelRunner&>(*r);
  ASSERT_TRUE(cpu.kv_cache().fp8());
  for (int l = 0; l < 2; ++l) {
    const std::string a = "model.layers." + std::to_string(l) + ".self_attn.";
    EXPECT_EQ(cpu.kv_cache().scales(l).k, file_scale("ct_kv", a + "k_scale")) << "layer " << l;
    EXPECT_EQ(cpu.kv_cache().scales(l).v, file_scale("ct_kv", a + "v_scale")) << "layer " << l;
    EXPECT_NE(cpu.kv_cache().scales(l).k, 1.f);
  }
  EXPECT_NE(cpu.kv_cache_line().find("from the checkpoint's k_scale/v_scale (2 of 2 layers)"), std::string::npos)
      << cpu.kv_cache_line();
  EXPECT_TRUE(r->spec().quant.kv_cache_scales);
  EXPECT_NE(r->spec().quant.describe().find("k/v cache scales"), std::string::npos);
}

TEST(Fp8KvCache, CheckpointWithoutScalesUsesOne) {
  auto r = runner("ct_channel", "fp8_e4m3");
  const auto& cpu = dynamic_cast<const CpuModelRunner&>(*r);
  EXPECT_EQ(cpu.kv_cache().scales(1).k, 1.f);
  EXPECT_EQ(cpu.kv_cache().scales(1).v, 1.f);
  EXPECT_NE(cpu.kv_cache_line().find("scales 1.0"), std::string::npos) << cpu.kv_cache_line();
}

// ct_kv holds ct_channel's weights: with an fp32 cache its scales are unused and the ids are ct_channel's.
TEST(Fp8KvCache, ScaledCheckpointLoadsWithAPlainCache) {
  auto kv = runner("ct_kv", "auto");
  EXPECT_NE(dynamic_cast<const CpuModelRunner&>(*kv).kv_cache_line().find("unused"), std::string::npos);
  auto plain = runner("ct_channel", "auto");
  EXPECT_EQ(generate(*kv), generate(*plain));
}

// Free-running greedy ids drift apart on these chaotic random models once one near-tie flips (printed,
// not held to a bar: fp8_checkpoint_test.cpp says why); teacher-forced top tokens measure each step alone.
TEST(Fp8KvCache, GreedyIdsStayCloseToFp32Kv) {
  const Ids fp32_kv = generate(*runner("ct_channel", "auto"));
  const Ids hf_twin = reference()["generated"]["twin_fp32"].get<Ids>();
  compare(generate(*runner("ct_kv", "fp8")), fp32_kv, "ct_kv, FP8 KV with the checkpoint's scales vs fp32 KV");
  compare(generate(*runner("ct_channel", "fp8")), fp32_kv, "ct_channel, FP8 KV with scales 1.0 vs fp32 KV");
  compare(generate(*runner("twin_fp32", "fp8")), hf_twin, "twin_fp32, FP8 KV vs HF (fp32 KV)");
  // A wrong scale (K or V read without it) or wrong codes leave most steps; e4m3 rounding a few, more
  // where FP8 activations re-quantize what attention returns (measured: ct_kv 253, ct_channel 261 and
  // twin_fp32 281 of 288).
  EXPECT_GE(same_top_share(*runner("ct_kv", "fp8"), fp32_kv, "ct_kv FP8 KV vs fp32 KV"), 0.85);
  EXPECT_GE(same_top_share(*runner("ct_channel", "fp8"), fp32_kv, "ct_channel FP8 KV (scales 1.0) vs fp32 KV"), 0.85);
  EXPECT_GE(same_top_share(*runner("twin_fp32", "fp8"), hf_twin, "twin_fp32 FP8 KV vs HF"), 0.95);
  EXPECT_EQ(same_top_share(*runner("ct_channel", "auto"), fp32_kv, "ct_channel fp32 KV vs itself"), 1.0);
}

}  // namespace
}  // namespace conveyor
