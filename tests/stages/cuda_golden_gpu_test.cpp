// Every golden model (tests/data/goldens, scripts/make_goldens.py) through the CUDA backend: StageModel
// on CudaOps with the KV cache on the device, logits left on the device and sampled greedily by the
// CUDA stage sampler. Tokens must follow the fp32 reference (the golden's greedy ids, which the CPU
// runner reproduces exactly: golden_test.cpp) under the tie rule of gpu_tie_rule.h. Also: the device
// sampler's greedy token equals the argmax of the same device logits downloaded, exactly, at every
// step; and the logits stay within a coarse bound of the reference (a gross wiring error, not bf16
// rounding, is what that catches).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/softmax.h"
#include "runtime/engine/block_allocator.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model/weights_source.h"
#include "stages/cuda/cuda_ops.h"
#include "stages/cuda/cuda_stage_sampler.h"
#include "stages/stage_model.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/stages/gpu_tie_rule.h"
#include "tests/stages/model_driver.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

constexpr float kLogitBound = 0.15f;  // |gpu - ref| <= kLogitBound * max(1, max |ref|) before divergence

struct Golden {
  std::string dir;
  ModelSpec spec;
  nlohmann::json doc;
  std::vector<float> step_logits;  // [prompts, new_tokens, vocab]
  int new_tokens = 0;

  size_t num_prompts() const { return doc["prompts"].size(); }
  std::vector<int32_t> prompt(size_t p) const { return doc["prompts"][p]["prompt_ids"].get<std::vector<int32_t>>(); }
  std::vector<int32_t> tokens(size_t p) const { return doc["prompts"][p]["greedy_ids"].get<std::vector<int32_t>>(); }
  std::vector<float> step(size_t p, size_t i) const {
    const size_t v = static_cast<size_t>(spec.vocab);
    auto b = step_logits.begin() + static_cast<std::ptrdiff_t>((p * new_tokens + i) * v);
    return std::vector<float>(b, b + static_cast<std::ptrdiff_t>(v));
  }
};

Golden load_golden(const std::string& name) {
  Golden g;
  g.dir = testing::data_path("goldens/" + name);
  g.spec = load_model_spec(g.dir);
  std::ifstream in(g.dir + "/golden.json");
  g.doc = nlohmann::json::parse(in);
  g.new_tokens = g.doc["new_tokens"].get<int>();
  g.step_logits = testing::read_f32_file(g.dir + "/step_logits.bin");
  return g;
}

float max_abs(const std::vector<float>& v) {
  float m = 1.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The logits of a step where GPU and reference saw the same tokens must be near the reference.
void expect_near_reference(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const float bound = kLogitBound * max_abs(ref);
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_TRUE(std::isfinite(got[t])) << what << ": logit " << t << " is " << got[t];
    ASSERT_LE(std::fabs(got[t] - ref[t]), bound) << what << ": logit " << t << " is " << got[t] << ", reference "
                                                  << ref[t];
  }
}

// Per-prompt state of a greedy run compared step by step.
struct Track {
  std::vector<int32_t> got;
  bool diverged = false;
};

// Records step i's token of prompt p, checking its logits while the run still follows the reference.
void record(const Golden& g, size_t p, Track& t, int32_t token, const std::vector<float>& logits) {
  const size_t i = t.got.size();
  const std::vector<int32_t> want = g.tokens(p);
  const bool on_reference = std::equal(t.got.begin(), t.got.end(), want.begin());
  if (on_reference && i < static_cast<size_t>(g.new_tokens))
    expect_near_reference(logits, g.step(p, i), "prompt " + std::to_string(p) + " step " + std::to_string(i));
  t.got.push_back(token);
}

float tie_fraction(DType dt) { return dt == DType::kBF16 ? testing::kTieFractionBf16 : testing::kTieFraction; }
double min_compared(DType dt) { return dt == DType::kBF16 ? testing::kMinComparedBf16 : testing::kMinComparedF16; }

size_t check_prompt(const Golden& g, size_t p, const Track& t, const std::string& label, DType dt) {
  const testing::TieCheck c = testing::check_with_ties(label + " prompt " + std::to_string(p), t.got, g.tokens(p),
                                                       [&](size_t i) { return g.step(p, i); }, tie_fraction(dt));
  EXPECT_EQ(c.error, "");
  return c.matched;
}

class CudaGolden : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

// Every prompt alone: whole prefill, then greedy decode, logits and tokens checked at every step.
TEST_P(CudaGolden, PrefillAndGreedyDecodeFollowTheReference) {
  const Golden g = load_golden(std::get<0>(GetParam()));
  const DType dt = std::get<1>(GetParam());
  testing::ModelDriver gpu(g.spec, g.dir, make_cuda_ops(0, dt));
  size_t matched = 0, total = 0;
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const int64_t id = static_cast<int64_t>(p);
    Track t;
    std::vector<std::vector<float>> rows;
    StepPlan plan;
    gpu.add(plan, id, g.prompt(p), true);
    std::vector<int32_t> tok = gpu.run(plan, &rows);
    ASSERT_EQ(tok.size(), 1u);
    record(g, p, t, tok[0], rows[0]);
    while (t.got.size() < static_cast<size_t>(g.new_tokens)) {
      StepPlan next;
      gpu.add(next, id, {t.got.back()}, true);
      tok = gpu.run(next, &rows);
      ASSERT_EQ(tok.size(), 1u);
      record(g, p, t, tok[0], rows[0]);
    }
    matched += check_prompt(g, p, t, "alone", dt);
    total += t.got.size();
  }
  // Ties are rare: most tokens must be compared, or the rule would hide a broken backend.
  EXPECT_GE(static_cast<double>(matched), min_compared(dt) * static_cast<double>(total))
      << "only " << matched << " of " << total << " tokens followed the reference";
}

// All prompts at once, prefilled in 5-token chunks side by side (mixed prefill and decode batches
// through the prefill and decode kernels), then decoded together; each follows its own reference.
TEST_P(CudaGolden, ChunkedBatchedPrefillAndDecodeFollowTheReference) {
  const Golden g = load_golden(std::get<0>(GetParam()));
  const DType dt = std::get<1>(GetParam());
  testing::ModelDriver gpu(g.spec, g.dir, make_cuda_ops(0, dt));
  const size_t n = g.num_prompts();
  std::vector<size_t> fed(n, 0);
  std::vector<Track> tracks(n);
  for (;;) {
    StepPlan plan;
    std::vector<size_t> order;  // prompt of each logits row
    for (size_t p = 0; p < n; ++p) {
      const std::vector<int32_t> prompt = g.prompt(p);
      if (fed[p] < prompt.size()) {
        // Dynamic NTK past max_position_embeddings rotates a chunked prefill differently from one
        // prefill (cpu_model_runner.cpp), so those prompts go in whole.
        const bool whole = g.spec.rope_scaling.type == RopeScalingType::kDynamic &&
                           static_cast<int64_t>(prompt.size()) > g.spec.max_position_embeddings;
        const size_t e = whole ? prompt.size() : std::min(prompt.size(), fed[p] + 5);
        gpu.add(plan, static_cast<int64_t>(p), std::vector<int32_t>(prompt.begin() + fed[p], prompt.begin() + e),
                e == prompt.size());
        if (e == prompt.size()) order.push_back(p);
        fed[p] = e;
      } else if (tracks[p].got.size() < static_cast<size_t>(g.new_tokens)) {
        gpu.add(plan, static_cast<int64_t>(p), {tracks[p].got.back()}, true);
        order.push_back(p);
      }
    }
    if (plan.seqs.empty()) break;
    std::vector<std::vector<float>> rows;
    const std::vector<int32_t> tok = gpu.run(plan, &rows);
    ASSERT_EQ(tok.size(), order.size());
    for (size_t r = 0; r < order.size(); ++r) record(g, order[r], tracks[order[r]], tok[r], rows[r]);
  }
  size_t matched = 0, total = 0;
  for (size_t p = 0; p < n; ++p) {
    matched += check_prompt(g, p, tracks[p], "batched", dt);
    total += tracks[p].got.size();
  }
  EXPECT_GE(static_cast<double>(matched), min_compared(dt) * static_cast<double>(total))
      << "only " << matched << " of " << total << " tokens followed the reference";
}

std::string case_name(const ::testing::TestParamInfo<CudaGolden::ParamType>& info) {
  return std::get<0>(info.param) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Goldens, CudaGolden,
                         ::testing::Combine(::testing::Values("llama3_rope", "qwen2_tied_mqa", "mistral_swa",
                                                              "llama_hd128", "llama_dynamic", "llama_deep"),
                                            ::testing::Values(DType::kBF16, DType::kF16)),
                         case_name);

}  // namespace
}  // namespace conveyor
