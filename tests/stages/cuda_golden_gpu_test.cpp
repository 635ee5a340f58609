// Every golden model (tests/data/goldens, scripts/make_goldens.py) through the CUDA backend: StageModel
// on CudaOps with the KV cache on the device, logits left on the device and sampled greedily by the
// CUDA stage sampler. Tokens must follow the fp32 reference (the golden's greedy ids, which the CPU
// runner reproduces exactly: golden_test.cpp) under the tie rule of gpu_tie_rule.h. Also: the device
// sampler's greedy token equals the argmax of the same device logits downloaded, exactly, at every
// step; and the logits stay within a coarse bound of the reference (a gross wiring error, not bf16
// rounding, is what that catches).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/cuda/cuda_ops.h"
#include "tests/stages/gpu_tie_rule.h"
#include "tests/stages/model_driver.h"
#include "tests/stages/reference_data.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

constexpr float kLogitBound = 0.15f;  // |gpu - ref| <= kLogitBound * max(1, max |ref|) before divergence

using testing::Golden;
using testing::GreedyRun;
using testing::load_golden;

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

// Checks the logits of every step where the run still followed the reference (saw the same tokens).
void check_logits(const Golden& g, size_t p, const GreedyRun& run) {
  const std::vector<int32_t> want = g.tokens(p);
  for (size_t i = 0; i < run.tokens.size() && i < static_cast<size_t>(g.new_tokens); ++i) {
    if (!std::equal(run.tokens.begin(), run.tokens.begin() + static_cast<std::ptrdiff_t>(i), want.begin())) break;
    expect_near_reference(run.logits[i], g.step(p, i), "prompt " + std::to_string(p) + " step " + std::to_string(i));
  }
}

float tie_fraction(DType dt) { return dt == DType::kBF16 ? testing::kTieFractionBf16 : testing::kTieFraction; }
double min_compared(DType dt) { return dt == DType::kBF16 ? testing::kMinComparedBf16 : testing::kMinComparedF16; }

// Tokens under the tie rule and logits near the reference for every prompt; most tokens compared.
void check_runs(const Golden& g, const std::vector<GreedyRun>& runs, const std::string& label, DType dt) {
  ASSERT_EQ(runs.size(), g.num_prompts());
  size_t matched = 0, total = 0;
  for (size_t p = 0; p < runs.size(); ++p) {
    check_logits(g, p, runs[p]);
    const testing::TieCheck c = testing::check_with_ties(label + " prompt " + std::to_string(p), runs[p].tokens,
                                                         g.tokens(p), [&](size_t i) { return g.step(p, i); },
                                                         tie_fraction(dt));
    EXPECT_EQ(c.error, "");
    matched += c.matched;
    total += runs[p].tokens.size();
  }
  // Ties are rare: most tokens must be compared, or the rule would hide a broken backend.
  EXPECT_GE(static_cast<double>(matched), min_compared(dt) * static_cast<double>(total))
      << "only " << matched << " of " << total << " tokens followed the reference";
}

class CudaGolden : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

// Every prompt alone: whole prefill, then greedy decode, logits and tokens checked at every step.
TEST_P(CudaGolden, PrefillAndGreedyDecodeFollowTheReference) {
  const Golden g = load_golden(std::get<0>(GetParam()));
  const DType dt = std::get<1>(GetParam());
  testing::ModelDriver gpu(g.spec, g.dir, make_cuda_ops(0, dt));
  check_runs(g, testing::greedy_alone(gpu, g.prompts(), g.new_tokens), "alone", dt);
}

// All prompts at once, prefilled in 5-token chunks side by side (mixed prefill and decode batches
// through the prefill and decode kernels), then decoded together; each follows its own reference.
TEST_P(CudaGolden, ChunkedBatchedPrefillAndDecodeFollowTheReference) {
  const Golden g = load_golden(std::get<0>(GetParam()));
  const DType dt = std::get<1>(GetParam());
  testing::ModelDriver gpu(g.spec, g.dir, make_cuda_ops(0, dt));
  std::vector<size_t> chunks;
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    // Dynamic NTK past max_position_embeddings rotates a chunked prefill differently from one
    // prefill (cpu_model_runner.cpp), so those prompts go in whole.
    const bool whole = g.spec.rope_scaling.type == RopeScalingType::kDynamic &&
                       static_cast<int64_t>(g.prompt(p).size()) > g.spec.max_position_embeddings;
    chunks.push_back(whole ? 0 : 5);
  }
  check_runs(g, testing::greedy_batched(gpu, g.prompts(), g.new_tokens, chunks), "batched", dt);
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
