// The reference data the model tests of every backend compare against: a golden checkpoint's
// transformers run (tests/data/goldens, scripts/make_goldens.py) and the SmolLM2 greedy continuations
// (tests/data/smollm2_reference.json, scripts/make_smollm2_reference.py). One loader for the CPU and
// the GPU tests, so both read the same prompts, tokens and logits.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/spec.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor::testing {

struct Golden {
  std::string dir;
  ModelSpec spec;
  nlohmann::json doc;
  std::vector<float> step_logits;  // [prompts, new_tokens, vocab]
  float atol = 0, rtol = 0;        // transformers' fp32 run against the fp32 CPU runner
  int new_tokens = 0;

  size_t num_prompts() const { return doc["prompts"].size(); }
  std::vector<int32_t> prompt(size_t p) const { return doc["prompts"][p]["prompt_ids"].get<std::vector<int32_t>>(); }
  std::vector<int32_t> tokens(size_t p) const { return doc["prompts"][p]["greedy_ids"].get<std::vector<int32_t>>(); }
  std::vector<float> last_logits(size_t p) const { return doc["prompts"][p]["last_logits"].get<std::vector<float>>(); }
  std::vector<std::vector<int32_t>> prompts() const {
    std::vector<std::vector<int32_t>> out;
    for (size_t p = 0; p < num_prompts(); ++p) out.push_back(prompt(p));
    return out;
  }
  // The logits that chose greedy token i of prompt p.
  std::vector<float> step(size_t p, size_t i) const {
    const size_t v = static_cast<size_t>(spec.vocab);
    auto b = step_logits.begin() + static_cast<std::ptrdiff_t>((p * new_tokens + i) * v);
    return std::vector<float>(b, b + static_cast<std::ptrdiff_t>(v));
  }
};

inline Golden load_golden(const std::string& name) {
  Golden g;
  g.dir = data_path("goldens/" + name);
  g.spec = load_model_spec(g.dir);
  std::ifstream in(g.dir + "/golden.json");
  g.doc = nlohmann::json::parse(in);
  g.atol = g.doc["tolerance"]["logits_atol"].get<float>();
  g.rtol = g.doc["tolerance"]["logits_rtol"].get<float>();
  g.new_tokens = g.doc["new_tokens"].get<int>();
  g.step_logits = read_f32_file(g.dir + "/step_logits.bin");
  EXPECT_EQ(g.step_logits.size(), g.num_prompts() * g.new_tokens * static_cast<size_t>(g.spec.vocab));
  return g;
}

// One prompt of tests/data/smollm2_reference.json: transformers' greedy tokens and, per step, the gap
// between its top-2 logits.
struct SmolLm2Reference {
  std::string text;
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;
  std::vector<double> gaps;
};

inline std::vector<SmolLm2Reference> load_smollm2_reference() {
  std::ifstream in(data_path("smollm2_reference.json"));
  EXPECT_TRUE(in.good()) << "missing tests/data/smollm2_reference.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<SmolLm2Reference> refs;
  for (const auto& p : doc["prompts"])
    refs.push_back({p["text"].get<std::string>(), p["prompt_ids"].get<std::vector<int32_t>>(),
                    p["greedy_ids"].get<std::vector<int32_t>>(), p["top2_gaps"].get<std::vector<double>>()});
  return refs;
}

}  // namespace conveyor::testing
