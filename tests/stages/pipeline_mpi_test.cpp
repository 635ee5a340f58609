// The pipeline against one rank: for every golden model and SmolLM2, each pp x tp layout that fits the
// world (1-4 ranks) generates greedy tokens for 18 mixed requests over MPI, equal to the single-rank CPU
// runner's, also with uneven partitions, more micro-batches than stages and KV pools that force
// preemption; a pp=4 run's Chrome trace is checked against the usage summary. A model with no layout
// that fits the world, and the trace check below 4 ranks, skip visibly (GTEST_SKIP) rather than pass.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config/config.h"
#include "runtime/dist/process_groups.h"
#include "runtime/dist/world_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/spec.h"
#include "stages/architecture.h"
#include "stages/local_model_runner.h"
#include "stages/pipeline_stage.h"
#include "stages/stage_options.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/stages/pipeline_requests.h"
#include "tests/support/mpi_world.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::world_rank;
using testing::world_size;

struct Case {
  int pp = 1, tp = 1;
  std::string partition;  // "" = planner
  int micro_batches = 0;
  int num_blocks = 0;     // 0 = plenty
};

std::string describe(const Case& c) {
  return "pp=" + std::to_string(c.pp) + " tp=" + std::to_string(c.tp) +
         (c.partition.empty() ? "" : " partition=" + c.partition) + " micro_batches=" + std::to_string(c.micro_batches) +
         " blocks=" + std::to_string(c.num_blocks);
}

Config make_config(const std::string& model, const Case& c) {
  Config cfg;
  cfg.set("model.path", model, "test");
  cfg.set("cache.block_size", "8", "test");
  cfg.set("cache.num_blocks", std::to_string(c.num_blocks > 0 ? c.num_blocks : 1024), "test");
  cfg.set("parallel.pipeline", std::to_string(c.pp), "test");
  cfg.set("parallel.tensor", std::to_string(c.tp), "test");
  cfg.set("parallel.micro_batches", std::to_string(c.micro_batches), "test");
  if (!c.partition.empty()) cfg.set("parallel.partition", c.partition, "test");
  cfg.set("scheduler.max_num_seqs", "8", "test");
  cfg.set("scheduler.max_num_batched_tokens", "48", "test");
  return cfg;
}

// 18 greedy requests, outputs 1..max_out tokens (pipeline_requests.h).
std::vector<Request> make_requests(int64_t vocab, int max_out) {
  return testing::mixed_greedy_requests(vocab, 42, max_out);
}

// The real model costs ~100x a golden per token on the CPU: shorter outputs keep the test quick.
int max_out(const ModelSpec& spec) { return spec.layers > 8 ? 6 : 17; }

struct RunResult {
  std::vector<std::vector<int32_t>> tokens;  // leader only
  int64_t preemptions = 0;
  std::vector<RankTimeline> timelines;       // world rank 0 only
};

// Every rank of the world takes part in one pipeline of layout c.
RunResult run_pipeline(const std::string& model, const ModelSpec& spec, const Case& c) {
  const Config cfg = make_config(model, c);
  WorldConfig world(Layout{1, c.pp, c.tp}, world_rank());
  auto groups = make_process_groups(world, Backend::kCpu);
  PipelineParts parts = make_pipeline_stage(StageOptions::from_config(cfg), spec, world, *groups);
  RunResult res;
  if (world.is_leader()) {
    Engine engine(std::make_unique<PipelineRunner>(*parts.stage, parts.micro_batches), nullptr,
                  EngineOptions::from_config(cfg));
    for (const CompletionOutput& o : engine.generate(make_requests(spec.vocab, max_out(spec)))) res.tokens.push_back(o.token_ids);
    res.preemptions = engine.scheduler_stats().preemptions;
    engine.shutdown();
  } else {
    parts.stage->serve();
  }
  const RankCoord me = world.coord();
  res.timelines = gather_timelines(parts.stage->timeline(), me.data, me.stage, me.tensor, MPI_COMM_WORLD);
  // Rank 0 is the leader: share its preemption count so every rank can assert on it.
  MPI_Bcast(&res.preemptions, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  return res;
}

std::vector<std::vector<int32_t>> reference_tokens(const std::string& model, const ModelSpec& spec) {
  static std::map<std::string, std::vector<std::vector<int32_t>>> cache;
  auto it = cache.find(model);
  if (it != cache.end()) return it->second;
  Engine engine(make_cpu_model_runner(StageOptions::from_config(make_config(model, Case{1, 1, "", 0, 0})), spec), nullptr,
                EngineOptions::from_config(make_config(model, Case{1, 1, "", 0, 0})));
  std::vector<std::vector<int32_t>> out;
  for (const CompletionOutput& o : engine.generate(make_requests(spec.vocab, max_out(spec)))) out.push_back(o.token_ids);
  return cache[model] = out;
}

// The layouts this world size can run for a model.
std::vector<Case> cases_for(const ModelSpec& spec, bool small) {
  const int n = world_size();
  std::vector<Case> cases;
  auto tp_ok = [&](int tp) { return spec.heads % tp == 0 && (spec.kv_heads % tp == 0 || tp % spec.kv_heads == 0); };
  for (int tp : {1, 2}) {
    if (n % tp != 0 || !tp_ok(tp)) continue;
    const int pp = n / tp;
    if (pp > spec.layers || pp > 4) continue;
    cases.push_back(Case{pp, tp, "", 0, 0});
    if (!small) continue;
    cases.push_back(Case{pp, tp, "", pp + 2, 0});  // more micro-batches than stages
    cases.push_back(Case{pp, tp, "", 0, 16});      // a KV pool small enough to preempt
  }
  if (spec.layers == 5 && n == 3) cases.push_back(Case{3, 1, "[1, 3, 1]", 0, 0});
  if (spec.layers == 5 && n == 4) cases.push_back(Case{2, 2, "[4, 1]", 3, 16});
  if (spec.layers == 5 && n == 2) cases.push_back(Case{2, 1, "[1, 4]", 0, 0});
  return cases;
}

void check_model(const std::string& model, bool small) {
  const ModelSpec spec = load_model_spec(model);
  const std::vector<Case> cases = cases_for(spec, small);
  // Every rank sees the same spec and world size, so all ranks skip together and agree on the verdict.
  if (cases.empty()) {
    GTEST_SKIP() << "no pp x tp layout of " << spec.layers << " layers and " << spec.heads << " heads ("
                 << spec.kv_heads << " KV) fits " << world_size() << " ranks";
  }
  std::vector<std::vector<int32_t>> want;
  if (world_rank() == 0) want = reference_tokens(model, spec);
  for (const Case& c : cases) {
    SCOPED_TRACE(model + " " + describe(c));
    RunResult got = run_pipeline(model, spec, c);
    if (c.num_blocks > 0) {
      EXPECT_GT(got.preemptions, 0) << "the small KV pool should force preemption";
    }
    if (world_rank() != 0) continue;
    ASSERT_EQ(got.tokens.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.tokens[i], want[i]) << "request " << i;
  }
}

class PipelineGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineGolden, EveryLayoutMatchesOneRank) { check_model(testing::data_path("goldens/" + GetParam()), true); }

INSTANTIATE_TEST_SUITE_P(Goldens, PipelineGolden,
                         ::testing::Values("llama_deep", "llama3_rope", "qwen2_tied_mqa", "mistral_swa", "llama_hd128",
                                           "llama_dynamic"));

TEST(PipelineSmolLm2, EveryLayoutMatchesOneRank) {
  const std::string path = testing::test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  check_model(path, false);
}

TEST(PipelineTrace, ChromeTraceMatchesTheUsageSummary) {
  if (world_size() != 4) GTEST_SKIP() << "the trace check needs 4 ranks (pp=4), this world has " << world_size();
  const std::string model = testing::data_path("goldens/llama_deep");
  const ModelSpec spec = load_model_spec(model);
  RunResult got = run_pipeline(model, spec, Case{4, 1, "", 6, 0});
  if (world_rank() != 0) return;
  ASSERT_EQ(got.timelines.size(), 4u);
  const PipelineUsage usage = summarize_usage(got.timelines);
  const std::string path = testing::temp_dir("pipeline_trace") + "/trace.json";
  {
    std::ofstream out(path);
    out << chrome_trace(got.timelines, usage).dump();
  }
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<int, double> compute_us;
  std::map<int, std::set<int64_t>> steps;
  double first = 1e300, last = -1e300;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid"));
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid") && e.contains("name"));
    const double ts = e["ts"], dur = e["dur"];
    EXPECT_GE(dur, 0.0);
    first = std::min(first, ts);
    last = std::max(last, ts + dur);
    const int stage = e["args"]["stage"];
    if (e["cat"] == "compute") {
      compute_us[stage] += dur;
      steps[stage].insert(e["args"]["micro_batch"].get<int64_t>());
    }
  }
  const double window_us = last - first;
  EXPECT_NEAR(window_us, usage.window_s * 1e6, 1e-3 * window_us);
  ASSERT_EQ(usage.stages.size(), 4u);
  for (const StageUsage& s : usage.stages) {
    EXPECT_NEAR(100.0 * compute_us[s.stage] / window_us, s.busy_pct, 0.01) << "stage " << s.stage;
    EXPECT_NEAR(s.busy_pct + s.send_pct + s.bubble_pct, 100.0, 1e-6);
    EXPECT_GT(s.busy_pct, 0.0);
    EXPECT_EQ(steps[s.stage], steps[0]) << "every stage computes every micro-batch";
  }
  EXPECT_EQ(doc["conveyor_usage"]["stages"].size(), 4u);
}

}  // namespace
}  // namespace conveyor
