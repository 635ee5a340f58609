// A backend's greedy runs against the CPU twin's, as the FP8 stage test (cuda_fp8_gpu_test.cpp) and its CPU
// calibration (tie_ensemble_test.cpp) make them: each prompt free-running under the tie rule (check_with_ties: equal
// up to the first difference, which must be a tie) and teacher-forced on the twin's tokens (check_forced: every step
// compared, every difference a tie), the ensemble giving the second opinion past the tie fraction.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/stages/gpu_tie_rule.h"
#include "tests/stages/model_harness.h"
#include "tests/stages/tie_ensemble.h"
#include "tests/support/test_support.h"

namespace conveyor::testing {

struct TwinComparison {
  size_t total = 0;          // the twin's tokens over all prompts
  size_t matched = 0;        // free-running: tokens equal before each prompt's first difference
  size_t free_failures = 0;  // free-running: prompts whose first difference is not a tie
  size_t equal = 0, ties = 0, defects = 0;  // teacher-forced steps
  std::string first_error;                  // "" when every difference is a tie

  // The forced floor (gpu_tie_rule.h): the share of all steps that pick the twin's token.
  bool forced_floor_holds() const { return static_cast<double>(equal) >= kMinForcedEqual * static_cast<double>(total); }
};

// The twin's tokens of each run, for greedy_forced.
inline std::vector<std::vector<int32_t>> tokens_of(const std::vector<GreedyRun>& runs) {
  std::vector<std::vector<int32_t>> t;
  for (const GreedyRun& r : runs) t.push_back(r.tokens);
  return t;
}

// The prompts of the tiny FP8 checkpoints (tests/data/fp8/reference.json, scripts/make_fp8_checkpoints.py).
inline std::vector<std::vector<int32_t>> fp8_prompts() {
  std::ifstream in(data_path("fp8/reference.json"));
  return nlohmann::json::parse(in)["prompts"].get<std::vector<std::vector<int32_t>>>();
}

// got (free-running) and forced (teacher-forced on want's tokens) may each be null (not compared). A prompt's forced
// count stops after max_defects defects (each asks the ensemble for a verdict), and the comparison after
// stop_after_failed prompts have failed (a free-running failure or a forced defect): a test that plants a defect
// asks for a few failing prompts, and each verdict on one costs 256 twin runs or more.
inline TwinComparison compare_with_twin(const std::string& label, const std::vector<std::vector<int32_t>>& prompts,
                                        const std::vector<GreedyRun>& want, const std::vector<GreedyRun>* got,
                                        const std::vector<GreedyRun>* forced, const TieEnsemble& ensemble,
                                        size_t max_defects = SIZE_MAX, size_t stop_after_failed = SIZE_MAX) {
  TwinComparison r;
  size_t failed = 0;  // prompts with a free-running failure or a forced defect
  auto note = [&](const std::string& e) {
    if (e.empty()) return;
    std::printf("%s\n", e.c_str());
    if (r.first_error.empty()) r.first_error = e;
  };
  for (size_t p = 0; p < prompts.size() && failed < stop_after_failed; ++p) {
    const size_t failures_before = r.free_failures, defects_before = r.defects;
    const std::string what = label + " prompt " + std::to_string(p);
    const auto ref = [&](size_t i) { return want[p].logits[i]; };
    auto opinion = [&](const std::vector<GreedyRun>& runs) {
      return [&, runs_p = &runs[p]](size_t i) {
        return ensemble.accepts(what, prompts[p], want[p].tokens, i, runs_p->tokens[i], want[p].logits[i]);
      };
    };
    r.total += want[p].tokens.size();
    if (got != nullptr) {
      const TieCheck c = check_with_ties(what, (*got)[p].tokens, want[p].tokens, ref, kTieFractionBf16, opinion(*got));
      r.matched += c.matched;
      r.free_failures += c.error.empty() ? 0 : 1;
      note(c.error);
    }
    if (forced != nullptr) {
      const ForcedCheck f = check_forced(what, (*forced)[p].tokens, want[p].tokens, ref, kTieFractionBf16,
                                         opinion(*forced), max_defects);
      r.equal += f.equal;
      r.ties += f.ties;
      r.defects += f.defects;
      note(f.error);
    }
    failed += r.free_failures > failures_before || r.defects > defects_before ? 1 : 0;
  }
  if (got != nullptr)
    std::printf("%s: free-running, %zu of %zu tokens equal before any tie, %zu prompts' first difference not a tie\n",
                label.c_str(), r.matched, r.total, r.free_failures);
  if (forced != nullptr)
    std::printf("%s: teacher-forced, %zu of %zu steps equal, %zu ties, %zu defects\n", label.c_str(), r.equal, r.total,
                r.ties, r.defects);
  return r;
}

// `backend` over the prompts free-running and teacher-forced on the twin's tokens, both compared with the twin's
// runs `want` (the FP8 stage test's comparison, for the GPU and for its CPU stand-ins alike).
inline TwinComparison compare_backend_with_twin(const std::string& label, ModelHarness& backend,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const std::vector<GreedyRun>& want, const TieEnsemble& ensemble) {
  const std::vector<GreedyRun> got = greedy_alone(backend, prompts, static_cast<int>(want.at(0).tokens.size()));
  const std::vector<GreedyRun> forced = greedy_forced(backend, prompts, tokens_of(want));
  return compare_with_twin(label, prompts, want, &got, &forced, ensemble);
}

}  // namespace conveyor::testing
