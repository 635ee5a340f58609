// The CPU runner against transformers on the tiny golden checkpoints (scripts/make_goldens.py):
// last-prompt logits and every greedy step's logits within the golden's atol + rtol on every element,
// greedy tokens identical; chunked prefill and batching of several sequences give the same answers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/cpu_model_runner.h"
#include "stages/stage_options.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/stages/reference_data.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::Driver;
using testing::Golden;
using testing::greedy;
using testing::load_golden;

std::unique_ptr<LocalModelRunner> make_runner(const Golden& g) {
  return make_cpu_model_runner(StageOptions::from_config(testing::runner_config(g.dir, 64)), g.spec);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

// Every prompt alone: prefill whole, then greedy decode; logits checked at every step.
TEST_P(GoldenTest, PrefillAndGreedyDecodeMatchTransformers) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  Driver d(*runner);
  const std::vector<testing::GreedyRun> runs = testing::greedy_alone(d, g.prompts(), g.new_tokens);
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p) + " (" + std::to_string(g.prompt(p).size()) + " tokens)");
    ASSERT_EQ(runs[p].logits.size(), static_cast<size_t>(g.new_tokens));
    EXPECT_EQ(compare_all(runs[p].logits[0], g.last_logits(p), g.atol, g.rtol), "") << "last prompt position";
    for (int i = 0; i < g.new_tokens; ++i)
      EXPECT_EQ(compare_all(runs[p].logits[i], g.step(p, i), g.atol, g.rtol), "") << "greedy step " << i;
    EXPECT_EQ(runs[p].tokens, g.tokens(p));
  }
}

// Prefill in 7-token chunks gives the same last logits as one prefill. Dynamic NTK is the exception
// past max_position_embeddings (earlier chunks rotate with a smaller base; see cpu_model_runner.cpp),
// so for it only prompts within max_position_embeddings are chunked here.
TEST_P(GoldenTest, ChunkedPrefillMatches) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  int checked = 0;
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    if (g.spec.rope_scaling.type == RopeScalingType::kDynamic &&
        static_cast<int64_t>(g.prompt(p).size()) > g.spec.max_position_embeddings)
      continue;
    SCOPED_TRACE("prompt " + std::to_string(p));
    Driver d(*runner);
    std::vector<float> whole = d.prefill(1, g.prompt(p));
    std::vector<float> chunked = d.prefill(2, g.prompt(p), 7);
    EXPECT_EQ(compare_all(chunked, whole, 1e-5f, 1e-5f), "");
    EXPECT_EQ(compare_all(chunked, g.last_logits(p), g.atol, g.rtol), "");
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

// All prompts in one plan (prefill), then decoded together; each must match its solo golden. A
// second test mixes one sequence's chunked prefill with another's decode steps.
TEST_P(GoldenTest, BatchedSequencesMatchAlone) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  Driver d(*runner);
  const std::vector<testing::GreedyRun> runs = testing::greedy_batched(d, g.prompts(), g.new_tokens);
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    ASSERT_EQ(runs[p].logits.size(), static_cast<size_t>(g.new_tokens)) << "prompt " << p;
    for (int i = 0; i < g.new_tokens; ++i)
      EXPECT_EQ(compare_all(runs[p].logits[i], g.step(p, i), g.atol, g.rtol), "") << "prompt " << p << " step " << i;
    EXPECT_EQ(runs[p].tokens, g.tokens(p)) << "prompt " << p;
  }
}

TEST_P(GoldenTest, ChunkedPrefillInterleavedWithDecodes) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  Driver d(*runner);
  const std::vector<int32_t> a = g.prompt(1), b = g.prompt(2);  // 7 and 33 tokens
  std::vector<int32_t> got_a{greedy(d.prefill(10, a))}, got_b;
  size_t fed = 0;
  while (got_a.size() < static_cast<size_t>(g.new_tokens)) {
    StepPlan plan;
    d.add(plan, 10, {got_a.back()}, true);
    if (fed < b.size()) {  // B's prompt in 5-token chunks, only the last chunk wants logits
      const size_t e = std::min(b.size(), fed + 5);
      d.add(plan, 20, std::vector<int32_t>(b.begin() + fed, b.begin() + e), e == b.size());
      fed = e;
    } else {
      d.add(plan, 20, {got_b.back()}, true);
    }
    auto rows = d.run(plan);
    got_a.push_back(greedy(rows.at(0)));
    if (rows.size() == 2 && got_b.size() < static_cast<size_t>(g.new_tokens)) got_b.push_back(greedy(rows[1]));
  }
  EXPECT_EQ(got_a, g.tokens(1));
  const std::vector<int32_t> want_b = g.tokens(2);
  ASSERT_GE(got_b.size(), 16u);
  EXPECT_EQ(got_b, std::vector<int32_t>(want_b.begin(), want_b.begin() + static_cast<std::ptrdiff_t>(got_b.size())));
}

INSTANTIATE_TEST_SUITE_P(Goldens, GoldenTest,
                         ::testing::Values("llama3_rope", "qwen2_tied_mqa", "mistral_swa", "llama_hd128",
                                           "llama_dynamic", "llama_deep"));

// transformers 5 writes rope settings under rope_parameters; each golden must parse to its rule.
TEST(GoldenSpecs, RopeParametersAreRead) {
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/llama3_rope")).rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/llama3_rope")).rope_theta, 500000.0);
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/llama_hd128")).rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/llama_dynamic")).rope_scaling.type, RopeScalingType::kDynamic);
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/qwen2_tied_mqa")).rope_theta, 1000000.0);
  EXPECT_EQ(load_model_spec(testing::data_path("goldens/mistral_swa")).sliding_window.value_or(0), 48);
}

}  // namespace
}  // namespace conveyor
