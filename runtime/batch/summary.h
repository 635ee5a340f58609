// What a batch job did (counts, tokens, per-request latencies) and the --summary JSON made from it.
// Invariant: done counts finished requests including failed ones (so completed = done - failed);
// resumed ones (already in the output) and invalid input lines are counted apart.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace conveyor {

struct BatchJobStats {
  int64_t total = 0, resumed = 0, done = 0, failed = 0, invalid_lines = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, preemptions = 0;
  double elapsed_s = 0;
  std::vector<double> ttft_s, tpot_s;  // per request with output (tpot: with two or more tokens)
  bool interrupted = false;
  std::map<std::string, int64_t> ignored_fields;  // request field -> requests that carried it
};

// The --summary JSON: counts, rates (per second of elapsed_s), TTFT/TPOT {p50, p90, p99, count}, and
// `pipeline` (the usage summary with per-stage busy/bubble %) when not null, and `ignored_fields`.
nlohmann::json batch_summary_json(const BatchJobStats& stats, const nlohmann::json& pipeline);

}  // namespace conveyor
