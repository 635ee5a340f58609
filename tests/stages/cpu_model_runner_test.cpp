// make_cpu_model_runner beyond the goldens: dummy weights (deterministic per seed), KV sizing from
// cache.cpu_kv_cache_space, and malformed plans rejected with messages naming the sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/config/config.h"
#include "runtime/model/spec.h"
#include "stages/cpu_model_runner.h"
#include "stages/kv_cache.h"
#include "stages/stage_options.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

Config dummy_config(int seed) {
  Config cfg;
  cfg.set("model.load_format", "dummy", "test");
  cfg.set("model.config", testing::data_path("goldens/llama3_rope/config.json"), "test");
  cfg.set("runtime.seed", std::to_string(seed), "test");
  cfg.set("cache.num_blocks", "8", "test");
  return cfg;
}

std::vector<float> run_prompt(LocalModelRunner& runner, const std::vector<int32_t>& prompt) {
  testing::Driver d(runner);
  return d.prefill(1, prompt, 5);
}

TEST(CpuModelRunner, DummyWeightsAreDeterministicPerSeed) {
  ModelSpec spec = load_model_spec(testing::data_path("goldens/llama3_rope/config.json"));
  auto a = make_cpu_model_runner(StageOptions::from_config(dummy_config(7)), spec);
  auto b = make_cpu_model_runner(StageOptions::from_config(dummy_config(7)), spec);
  auto c = make_cpu_model_runner(StageOptions::from_config(dummy_config(8)), spec);
  EXPECT_EQ(a->num_kv_blocks(), 8);
  EXPECT_EQ(a->block_size(), 16);
  const std::vector<int32_t> prompt{3, 141, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64};
  std::vector<float> la = run_prompt(*a, prompt), lb = run_prompt(*b, prompt), lc = run_prompt(*c, prompt);
  ASSERT_EQ(la.size(), static_cast<size_t>(spec.vocab));
  for (float v : la) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(testing::compare_all(lb, la, 0.f, 0.f), "");
  EXPECT_NE(testing::compare_all(lc, la, 1e-3f, 1e-3f), "") << "another seed must give other weights";
}

TEST(CpuModelRunner, KvBlocksFromCacheSpace) {
  ModelSpec spec = load_model_spec(testing::data_path("goldens/llama3_rope"));
  Config cfg;
  cfg.set("cache.cpu_kv_cache_space", "0.01", "test");
  cfg.set("cache.block_size", "32", "test");
  const size_t budget = static_cast<size_t>(0.01 * 1024 * 1024 * 1024);
  const PagedKvShape kv{0, 0, static_cast<int>(spec.kv_heads), static_cast<int>(spec.head_dim)};
  const int fp32_blocks = cpu_kv_blocks(StageOptions::from_config(cfg), 3, kv, "test");
  EXPECT_EQ(fp32_blocks, KvCache::blocks_that_fit(budget, 3, 32, 2, 32, sizeof(float)));
  cfg.set("cache.kv_cache_dtype", "fp8", "test");  // one byte per element instead of four
  EXPECT_EQ(cpu_kv_blocks(StageOptions::from_config(cfg), 3, kv, "test"), KvCache::blocks_that_fit(budget, 3, 32, 2, 32, 1));
  EXPECT_NEAR(cpu_kv_blocks(StageOptions::from_config(cfg), 3, kv, "test"), 4.0 * fp32_blocks, 4.0);
  cfg.set("cache.cpu_kv_cache_space", "0.0000001", "test");
  testing::expect_error([&] { cpu_kv_blocks(StageOptions::from_config(cfg), 3, kv, "test"); }, "cache.cpu_kv_cache_space");
}

// --kv-cache-dtype fp8 on the CPU backend: e4m3 codes in the cache, scales 1.0 (no checkpoint scales), and
// logits within e4m3's rounding of the fp32 cache's.
TEST(CpuModelRunner, Fp8KvCacheRunsCloseToFp32) {
  ModelSpec spec = load_model_spec(testing::data_path("goldens/llama3_rope/config.json"));
  Config cfg = dummy_config(7);
  auto f32 = make_cpu_model_runner(StageOptions::from_config(cfg), spec);
  cfg.set("cache.kv_cache_dtype", "fp8_e4m3", "test");
  auto fp8 = make_cpu_model_runner(StageOptions::from_config(cfg), spec);
  const auto& runner = dynamic_cast<const CpuModelRunner&>(*fp8);
  EXPECT_TRUE(runner.kv_cache().fp8());
  EXPECT_EQ(runner.kv_cache().scales(0).k, 1.f);
  EXPECT_NE(runner.kv_cache_line().find("scales 1.0"), std::string::npos);
  const std::vector<int32_t> prompt{3, 141, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64};
  const std::vector<float> a = run_prompt(*f32, prompt), b = run_prompt(*fp8, prompt);
  EXPECT_NE(testing::compare_all(b, a, 0.f, 0.f), "") << "the FP8 cache must round K and V";
  float amax = 0.f;
  for (float x : a) amax = std::max(amax, std::fabs(x));
  EXPECT_EQ(testing::compare_all(b, a, 0.05f * amax, 0.f), "");
}

TEST(CpuModelRunner, OtherFp8KvFlavoursAreRefusedByName) {
  for (const char* d : {"fp8_e5m2", "fp8_inc", "fp8_ds_mla"}) {
    Config cfg = dummy_config(1);
    cfg.set("cache.kv_cache_dtype", d, "test");
    testing::expect_error([&] { StageOptions::from_config(cfg); }, std::string("cache.kv_cache_dtype = ") + d);
  }
}

TEST(CpuModelRunner, MalformedPlansAreClearErrors) {
  ModelSpec spec = load_model_spec(testing::data_path("goldens/llama3_rope"));
  auto runner = make_cpu_model_runner(StageOptions::from_config(testing::runner_config(testing::data_path("goldens/llama3_rope"), 8)), spec);
  std::vector<float> logits;
  StepPlan plan;
  plan.seqs.push_back(SeqChunk{42, 0, {1, 2, 3}, {}, true, {}});
  testing::expect_error([&] { runner->forward(plan, &logits); }, "sequence 42 covers positions [0, 3)");
  plan.seqs[0] = SeqChunk{43, 0, {}, {0}, true, {}};
  testing::expect_error([&] { runner->forward(plan, &logits); }, "sequence 43 has no new tokens");
  plan.seqs[0] = SeqChunk{44, 0, {1, 999}, {0}, true, {}};
  testing::expect_error([&] { runner->forward(plan, &logits); }, "999");
}

TEST(CpuModelRunner, MissingModelPathIsAnError) {
  ModelSpec spec = load_model_spec(testing::data_path("goldens/llama3_rope"));
  Config cfg;
  testing::expect_error([&] { make_cpu_model_runner(StageOptions::from_config(cfg), spec); }, "model.path is empty");
}

}  // namespace
}  // namespace conveyor
