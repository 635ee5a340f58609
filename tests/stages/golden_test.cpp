// The CPU runner against transformers on the tiny golden checkpoints (scripts/make_goldens.py):
// last-prompt logits and every greedy step's logits within the golden's atol + rtol on every element,
// greedy tokens identical; chunked prefill and batching of several sequences give the same answers.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/cpu_model_runner.h"
#include "stages/stage_options.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::Driver;
using testing::greedy;

struct Golden {
  std::string dir;
  ModelSpec spec;
  nlohmann::json doc;
  std::vector<float> step_logits;  // [prompts, new_tokens, vocab]
  float atol = 0, rtol = 0;
  int new_tokens = 0;

  std::vector<int32_t> prompt(size_t p) const { return doc["prompts"][p]["prompt_ids"].get<std::vector<int32_t>>(); }
  std::vector<int32_t> tokens(size_t p) const { return doc["prompts"][p]["greedy_ids"].get<std::vector<int32_t>>(); }
  std::vector<float> last_logits(size_t p) const { return doc["prompts"][p]["last_logits"].get<std::vector<float>>(); }
  size_t num_prompts() const { return doc["prompts"].size(); }
  std::vector<float> step(size_t p, int i) const {
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
  g.atol = g.doc["tolerance"]["logits_atol"].get<float>();
  g.rtol = g.doc["tolerance"]["logits_rtol"].get<float>();
  g.new_tokens = g.doc["new_tokens"].get<int>();
  g.step_logits = testing::read_f32_file(g.dir + "/step_logits.bin");
  EXPECT_EQ(g.step_logits.size(), g.num_prompts() * g.new_tokens * static_cast<size_t>(g.spec.vocab));
  return g;
}

std::unique_ptr<LocalModelRunner> make_runner(const Golden& g) {
  return make_cpu_model_runner(StageOptions::from_config(testing::runner_config(g.dir, 64)), g.spec);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

// Every prompt alone: prefill whole, then greedy decode; logits checked at every step.
TEST_P(GoldenTest, PrefillAndGreedyDecodeMatchTransformers) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  for (size_t p = 0; p < g.num_prompts(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p) + " (" + std::to_string(g.prompt(p).size()) + " tokens)");
    Driver d(*runner);
    std::vector<float> logits = d.prefill(1, g.prompt(p));
    EXPECT_EQ(compare_all(logits, g.last_logits(p), g.atol, g.rtol), "") << "last prompt position";
    std::vector<int32_t> got;
    for (int i = 0; i < g.new_tokens; ++i) {
      EXPECT_EQ(compare_all(logits, g.step(p, i), g.atol, g.rtol), "") << "greedy step " << i;
      got.push_back(greedy(logits));
      if (i + 1 == g.new_tokens) break;
      StepPlan plan;
      d.add(plan, 1, {got.back()}, true);
      logits = d.run(plan).at(0);
    }
    EXPECT_EQ(got, g.tokens(p));
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
// second round mixes one sequence's chunked prefill with the others' decode steps.
TEST_P(GoldenTest, BatchedSequencesMatchAlone) {
  Golden g = load_golden(GetParam());
  auto runner = make_runner(g);
  Driver d(*runner);
  const size_t n = g.num_prompts();
  StepPlan plan;
  for (size_t p = 0; p < n; ++p) d.add(plan, static_cast<int64_t>(p), g.prompt(p), true);
  std::vector<std::vector<int32_t>> got(n);
  for (int i = 0; i < g.new_tokens; ++i) {
    auto rows = d.run(plan);
    ASSERT_EQ(rows.size(), n);
    plan = StepPlan();
    for (size_t p = 0; p < n; ++p) {
      EXPECT_EQ(compare_all(rows[p], g.step(p, i), g.atol, g.rtol), "") << "prompt " << p << " step " << i;
      got[p].push_back(greedy(rows[p]));
      d.add(plan, static_cast<int64_t>(p), {got[p].back()}, true);
    }
  }
  for (size_t p = 0; p < n; ++p) EXPECT_EQ(got[p], g.tokens(p)) << "prompt " << p;
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
