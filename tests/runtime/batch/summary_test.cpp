// The --summary JSON: every count, the rates over elapsed time, TTFT/TPOT percentiles of random
// latencies equal to percentile(), and the pipeline section only when given.
#include "runtime/batch/summary.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "runtime/core/percentile.h"

namespace conveyor {
namespace {

using nlohmann::json;

TEST(BatchSummary, CountsRatesAndLatencyPercentiles) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(0.001, 2.0);
  BatchJobStats s;
  s.total = 40;
  s.resumed = 3;
  s.done = 37;
  s.failed = 5;
  s.invalid_lines = 2;
  s.prompt_tokens = 1234;
  s.output_tokens = 4321;
  s.preemptions = 6;
  s.elapsed_s = 12.5;
  for (int i = 0; i < 32; ++i) s.ttft_s.push_back(u(rng));
  for (int i = 0; i < 29; ++i) s.tpot_s.push_back(u(rng));
  const json j = batch_summary_json(s, nullptr);
  EXPECT_EQ(j["requests"], 40);
  EXPECT_EQ(j["completed"], 32);
  EXPECT_EQ(j["failed"], 5);
  EXPECT_EQ(j["invalid_lines"], 2);
  EXPECT_EQ(j["resumed"], 3);
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_EQ(j["prompt_tokens"], 1234);
  EXPECT_EQ(j["output_tokens"], 4321);
  EXPECT_EQ(j["preemptions"], 6);
  EXPECT_DOUBLE_EQ(j["elapsed_s"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["requests_per_second"].get<double>(), 32 / 12.5);
  EXPECT_DOUBLE_EQ(j["output_tokens_per_second"].get<double>(), 4321 / 12.5);
  EXPECT_DOUBLE_EQ(j["total_tokens_per_second"].get<double>(), (1234 + 4321) / 12.5);
  for (const char* key : {"ttft_s", "tpot_s"}) {
    const std::vector<double>& v = std::string(key) == "ttft_s" ? s.ttft_s : s.tpot_s;
    EXPECT_EQ(j[key]["count"], v.size()) << key;
    EXPECT_EQ(j[key]["p50"].get<double>(), percentile(v, 0.5)) << key;
    EXPECT_EQ(j[key]["p90"].get<double>(), percentile(v, 0.9)) << key;
    EXPECT_EQ(j[key]["p99"].get<double>(), percentile(v, 0.99)) << key;
  }
  EXPECT_FALSE(j.contains("pipeline"));
}

TEST(BatchSummary, InstantJobStaysFiniteAndCarriesThePipeline) {
  BatchJobStats s;
  s.done = 1;
  s.output_tokens = 3;
  s.interrupted = true;
  const json pipeline = {{"stages", json::array({{{"busy", 0.7}}})}};
  const json j = batch_summary_json(s, pipeline);
  EXPECT_DOUBLE_EQ(j["output_tokens_per_second"].get<double>(), 3 / 1e-9);
  EXPECT_EQ(j["ttft_s"]["count"], 0);
  EXPECT_EQ(j["ttft_s"]["p50"], 0.0);
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_EQ(j["pipeline"], pipeline);
}

}  // namespace
}  // namespace conveyor
