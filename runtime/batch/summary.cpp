// batch_summary_json (see summary.h). Rates divide by at least 1 ns so an instant job stays finite.
#include "runtime/batch/summary.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/core/percentile.h"

namespace conveyor {

namespace {

nlohmann::json percentiles(const std::vector<double>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p90", percentile(v, 0.9)}, {"p99", percentile(v, 0.99)},
          {"count", v.size()}};
}

}  // namespace

nlohmann::json batch_summary_json(const BatchJobStats& s, const nlohmann::json& pipeline) {
  const double t = std::max(s.elapsed_s, 1e-9);
  nlohmann::json j = {{"requests", s.total},
                      {"completed", s.done - s.failed},
                      {"failed", s.failed},
                      {"invalid_lines", s.invalid_lines},
                      {"resumed", s.resumed},
                      {"interrupted", s.interrupted},
                      {"prompt_tokens", s.prompt_tokens},
                      {"output_tokens", s.output_tokens},
                      {"elapsed_s", s.elapsed_s},
                      {"requests_per_second", static_cast<double>(s.done - s.failed) / t},
                      {"output_tokens_per_second", static_cast<double>(s.output_tokens) / t},
                      {"total_tokens_per_second", static_cast<double>(s.prompt_tokens + s.output_tokens) / t},
                      {"ttft_s", percentiles(s.ttft_s)},
                      {"tpot_s", percentiles(s.tpot_s)},
                      {"preemptions", s.preemptions},
                      {"ignored_fields", s.ignored_fields}};
  if (!pipeline.is_null()) j["pipeline"] = pipeline;
  return j;
}

}  // namespace conveyor
