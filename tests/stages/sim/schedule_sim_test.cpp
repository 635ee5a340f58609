// The schedule simulator: the event logic against step times computed by hand from the cost model
// (one request through one and two stages, with GemmRunner's first-use timing of each GEMM bucket), TP
// adding exactly its all-reduces, data parallelism splitting the requests, preemption when KV runs out, and
// ranks sharing CPUs (issue 18's 4(b)). Check 4(a), the measured GPU runs: schedule_sim_measured_test.cpp.
#include "stages/sim/schedule_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "runtime/engine/step_plan.h"
#include "stages/cpu_probe.h"
#include "stages/pipeline_trace.h"
#include "stages/sim/cpu_run_queues.h"
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

// GemmRunner's first-use timing that one sequence's step i (`rows` new tokens) costs a stage without the
// start-up warm-up (runtime.gemm_warmup=false): its layers' shapes at the prefill's rows and again at the
// first decode's one row (another bucket), the LM head's (one logit row every step) at step 0 on the last
// stage.
double first_use(const ModelSpec& s, const ClusterSpec& c, int pipeline, int step, int rows, bool last) {
  Workload w;
  w.pipeline = pipeline;
  if (step > 1) return 0.0;
  const double layers = layer_gemm_tuning_time(s, w, c.ceilings(), rows);
  return layers + (step == 0 && last ? head_gemm_tuning_time(s, w, c.ceilings(), 1) : 0.0);
}

TEST(ScheduleSim, OneRequestOneStageIsTheSumOfItsSteps) {
  const ModelSpec s = model("llama-3-8b.yaml");
  const ClusterSpec c = cluster("h200-1.yaml");
  SimWorkload w;
  w.num_prompts = 1, w.input_len = 37, w.output_len = 9;
  w.gemm_warmup = false;
  const SimResult r = simulate_layout(s, c, w, SimLayout{});
  ASSERT_TRUE(r.fits) << r.why_not;
  double want = 0, first = 0, tuning = 0;
  for (int i = 0; i < w.output_len; ++i) {
    const int start = i == 0 ? 0 : static_cast<int>(w.input_len) + i - 1;
    const int rows = i == 0 ? static_cast<int>(w.input_len) : 1;
    const StepTimes t = one_seq_step(s, c, 1, 1, start, rows);
    tuning += first_use(s, c, 1, i, rows, true);
    want += s.layers * t.layer + t.embed + t.head + c.gpu.measured.step_overhead_s + first_use(s, c, 1, i, rows, true);
    if (i == 0) first = want;
  }
  EXPECT_GT(tuning, 0.0);
  // With the start-up warm-up (the default) the run times no GEMM: the same steps, less the tuning.
  w.gemm_warmup = true;
  EXPECT_NEAR(simulate_layout(s, c, w, SimLayout{}).elapsed_s, want - tuning, 1e-12 * want);
  EXPECT_NEAR(r.elapsed_s, want, 1e-12 * want);
  EXPECT_NEAR(r.ttft_p50, first, 1e-12 * want);
  EXPECT_NEAR(r.tpot_p50, (want - first) / (w.output_len - 1), 1e-9);
  EXPECT_EQ(r.plans, w.output_len);
  // The host's work between steps is time the kernels wait: the only bubble of a lone stage.
  EXPECT_NEAR(r.stages[0].overhead_s, w.output_len * c.gpu.measured.step_overhead_s, 1e-12);
  EXPECT_NEAR(r.stages[0].bubble, r.stages[0].overhead_s / r.elapsed_s, 1e-9);
}

TEST(ScheduleSim, OneRequestTwoStagesPaysEveryEdgeEachToken) {
  const ModelSpec s = model("llama-3-8b.yaml");
  ClusterSpec c = cluster("h200-8x8-ib.yaml");
  SimWorkload w;
  w.num_prompts = 1, w.input_len = 16, w.output_len = 5;
  w.gemm_warmup = false;
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
            (i == 0 ? send : c.intra_node.latency + s.hidden * 2.0 / c.intra_node.bandwidth) +
            first_use(s, c, 2, i, n, false) + first_use(s, c, 2, i, n, true);
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
  // ~0.9 GiB of KV after 15 GiB of weights and ~5.3 GiB of activations, logits and workspaces.
  c.gpu.memory = 23.5 * (1ull << 30);
  SimWorkload w;
  w.num_prompts = 64, w.input_len = 512, w.output_len = 512, w.max_num_seqs = 64;
  const SimResult r = simulate_layout(s, c, w, SimLayout{});
  ASSERT_TRUE(r.fits) << r.why_not;
  EXPECT_LT(r.peak_running, 64);
  EXPECT_GT(r.preemptions, 0);
  EXPECT_LE(r.stages[0].weight_bytes + r.stages[0].kv_bytes, c.gpu.memory * w.memory_utilization);
}

// A CPU host from tests/data/doctor_cpu.json with the given sharing curve.
ClusterSpec cpu_host(std::vector<double> speed) {
  const std::string path = testing::temp_dir("schedule_sim_test") + "/cpu.yaml";
  std::ofstream(path) << "nodes: 1\ngpus_per_node: 4\ngpu: {preset: cpu, doctor_json: " << testing::data_path("doctor_cpu.json")
                      << "}\n";
  ClusterSpec c = load_cluster_spec(path);
  c.gpu.measured.sharing.speed = std::move(speed);
  return c;
}

SimWorkload cpu_workload() {
  SimWorkload w;
  w.num_prompts = 24, w.input_len = 8, w.output_len = 12, w.max_num_seqs = 8;
  w.cpu_kv_cache_gib = 0.25;
  return w;
}

// Ranks time-slicing one core (speed 1/k with k computing) can do no more than one rank's work at a
// time: two stages that would overlap take the sum of their work, less only the moments when one rank
// waits alone on a link. Without sharing the same plans overlap. The KV pool is the CPU backend's.
TEST(ScheduleSim, RanksSharingOneCoreAddTheirWork) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  SimLayout pp2;
  pp2.pipeline = 2;
  const SimResult free = simulate_layout(s, cpu_host({1, 1, 1, 1}), w, pp2);
  const SimResult one = simulate_layout(s, cpu_host({1, 1.0 / 2, 1.0 / 3, 1.0 / 4}), w, pp2);
  ASSERT_TRUE(free.fits && one.fits) << free.why_not << one.why_not;
  EXPECT_EQ(free.plans, one.plans);
  double work = 0;
  for (const SimStage& st : free.stages) work += st.compute_s + st.allreduce_s + st.overhead_s;
  EXPECT_LT(free.elapsed_s, 0.75 * work);  // the stages overlap
  EXPECT_GT(one.elapsed_s, 0.98 * work);
  EXPECT_LT(one.elapsed_s, 1.02 * work);
  // Each stage's busy wall time stretches while the other computes; its work does not change.
  for (size_t i = 0; i < 2; ++i) EXPECT_GT(one.stages[i].compute_s, free.stages[i].compute_s);
  // The CPU backend's pool: cache.cpu_kv_cache_space over the fullest stage's fp32 KV per block.
  const int64_t layers = std::max(free.stages[0].last_layer, 16 - free.stages[0].last_layer);
  EXPECT_EQ(free.num_blocks, static_cast<int64_t>(0.25 * (1ull << 30) / (layers * 2.0 * 4 * 64 * 4 * 16)));
}

// One rank alone never shares; pp 1 on a CPU host is the sum of its steps as on a GPU.
TEST(ScheduleSim, OneRankRunsAtItsOwnSpeed) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimResult a = simulate_layout(s, cpu_host({1, 0.5}), cpu_workload(), SimLayout{});
  const SimResult b = simulate_layout(s, cpu_host({}), cpu_workload(), SimLayout{});
  EXPECT_DOUBLE_EQ(a.elapsed_s, b.elapsed_s);
  EXPECT_EQ(a.plans, b.plans);
}

// Issue 18, 4(b), the TP path: beyond a CPU host's CPUs the ranks time-slice, and a rank waiting in a TP
// all-reduce yields its CPU to a co-runner for up to the measured slice. Ranks alike keep the processor
// sharing speed; a TP pair with short turns beside ranks that compute without pause gets less, and the
// node's k * at(k) is kept.
TEST(ScheduleSim, TpRanksThatYieldTheirCpuGetShortTurns) {
  CoreSharing c;
  c.cpus = 2;
  c.speed = {1.0, 0.9, 0.6, 0.45};
  c.slice_s = 6e-3;
  EXPECT_EQ(cpu_node_rates(c, {1, 1}, {0.5e-3, 0.0}), (std::vector<double>{0.9, 0.9}));  // no slicing
  for (double turn : {0.0, 0.5e-3, 20e-3}) {
    const std::vector<double> r = cpu_node_rates(c, {2, 2}, {turn, turn});
    EXPECT_EQ(r, (std::vector<double>{0.45, 0.45})) << turn;  // exactly: no rate change to reschedule
  }
  // A TP decode pair (turns of 0.5 ms) beside two ranks that never wait: 4 x 0.45 split 0.5 : 6 a rank.
  const std::vector<double> r = cpu_node_rates(c, {2, 2}, {0.5e-3, 0.0});
  EXPECT_NEAR(r[0], 4 * 0.45 * 0.5 / 13.0, 1e-12);
  EXPECT_NEAR(r[1], 4 * 0.45 * 6.0 / 13.0, 1e-12);
  EXPECT_NEAR(2 * r[0] + 2 * r[1], 4 * 0.45, 1e-12);
  EXPECT_EQ(cpu_node_rates(c, {2, 2}, {0.5e-3, 30e-3}), r);  // a prefill's long turns end at the slice
  // doctor's holds: a co-runner that is a TP rank too keeps the CPU for its measured hold, less than its
  // turn (its own all-reduces hand the CPU back early), the pair's short turns for about themselves.
  c.slice_s = 16e-3;
  c.holds = {{1.5e-3, 1.5e-3}, {12e-3, 8e-3}};
  const double pair = c.hold(0.5e-3), prefill = c.hold(9e-3);
  EXPECT_DOUBLE_EQ(pair, 0.5e-3);
  EXPECT_NEAR(prefill, 1.5e-3 + 6.5e-3 * 7.5 / 10.5, 1e-15);
  const std::vector<double> h = cpu_node_rates(c, {2, 2}, {0.5e-3, 9e-3});
  EXPECT_NEAR(h[0], 4 * 0.45 * pair / (2 * pair + 2 * prefill), 1e-12);
  EXPECT_GT(h[0], cpu_node_rates(c, {2, 2}, {0.5e-3, 0.0})[0]);  // a co-runner that never waits holds longer
  c.holds.clear();
  c.slice_s = 0;                                               // not measured: processor sharing
  EXPECT_EQ(cpu_node_rates(c, {2, 2}, {0.5e-3, 0.0}), (std::vector<double>{0.45, 0.45}));
}

// doctor's slice (cpu_probe.h) is the one with which cpu_node_rates reproduces doctor's TP round probe;
// a pair that kept its even share gives a slice no longer than its own turn (processor sharing).
TEST(ScheduleSim, DoctorsSliceReproducesItsTpRoundProbe) {
  CoreSharing c;
  c.cpus = 2;
  c.speed = {1.0, 0.87, 0.59, 0.43};
  const double alone = 0.9e-3, busy = 19e-3, g = alone * c.speed[1];
  c.slice_s = slice_from_tp_rounds(alone, busy, c.speed);
  EXPECT_GT(c.slice_s, g);
  EXPECT_NEAR(g / cpu_node_rates(c, {2, 2}, {g, 0.0})[0], busy, 1e-12);
  EXPECT_NEAR(slice_from_tp_rounds(alone, g / c.speed[3], c.speed), g, 1e-12);
  EXPECT_EQ(slice_from_tp_rounds(alone, 0.1 * alone, c.speed), 0.0);
}

// The same in a simulated run: pp 2 x tp 2 on 2 CPUs, where one stage's decode steps meet the other's
// prefills. With a slice its stage-0 steps take longer beside stage 1's prefill and its bubble falls; the
// plans are the same. pp 2 x tp 1 has no TP waits: the slice changes nothing.
TEST(ScheduleSim, TpDecodeBesidePrefillStretchesOnSharedCpus) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  ClusterSpec ps = cpu_host({1, 0.9, 0.6, 0.45}), sliced = ps;
  sliced.gpu.measured.sharing.slice_s = 10e-3;
  SimLayout pp2, tp2;
  pp2.pipeline = 2;
  tp2.pipeline = 2, tp2.tensor = 2;
  EXPECT_DOUBLE_EQ(simulate_layout(s, ps, w, pp2).elapsed_s, simulate_layout(s, sliced, w, pp2).elapsed_s);
  const SimResult a = simulate_layout(s, ps, w, tp2), b = simulate_layout(s, sliced, w, tp2);
  ASSERT_TRUE(a.fits && b.fits) << a.why_not << b.why_not;
  EXPECT_EQ(a.plans, b.plans);
  EXPECT_GT(b.stages[0].compute_s + b.stages[0].allreduce_s, 1.05 * (a.stages[0].compute_s + a.stages[0].allreduce_s));
  EXPECT_LT(b.stages[0].bubble, a.stages[0].bubble);
}

// Issue 18, 4(b), the run-queue path: each CPU of a node queues its own ranks (stages/sim/cpu_run_queues.h).
// A rank that wakes with its previous CPU taken and another idle moves; with none idle it queues on its
// previous CPU; a CPU left idle pulls a rank from a doubled one; a rank that computes on keeps its CPU.
TEST(ScheduleSim, CpuRunQueuesPlaceRanksAsTheKernelDoes) {
  CoreSharing c;
  c.cpus = 2;
  c.speed = {1.0, 0.9, 0.6, 0.45};
  CpuRunQueues q(2);
  q.settle({true, false, false});
  EXPECT_EQ(q.cpu_of(0), 0);
  q.settle({true, false, true});  // rank 2's previous CPU (2 % 2 = 0) is taken, CPU 1 is idle
  EXPECT_EQ(q.cpu_of(2), 1);
  EXPECT_EQ(q.rates(c, 1.0), (std::vector<double>{0.9, 0.0, 0.9}));
  q.settle({true, true, true});  // rank 1 starts on CPU 1 (both taken): beside rank 2
  EXPECT_EQ(q.cpu_of(0), 0);
  EXPECT_EQ(q.cpu_of(1), 1);
  const std::vector<double> r = q.rates(c, 1.0);
  EXPECT_NEAR(r[0], 3 * 0.6 / 2, 1e-12);  // a CPU alone: the node's 3 at(3) over 2 CPUs
  EXPECT_NEAR(r[1], 3 * 0.6 / 4, 1e-12);  // doubled up: half of it
  EXPECT_NEAR(r[2], 3 * 0.6 / 4, 1e-12);
  EXPECT_EQ(q.rates(c, 0.0), (std::vector<double>{0.6, 0.6, 0.6}));  // no stickiness: processor sharing, exactly
  EXPECT_NEAR(q.rates(c, 0.25)[0], 0.25 * 0.9 + 0.75 * 0.6, 1e-12);
  q.settle({false, true, true});  // rank 0 stops: CPU 0 pulls rank 1 or 2
  EXPECT_NE(q.cpu_of(1), q.cpu_of(2));
  EXPECT_EQ(q.cpu_of(0), -1);
  const int one = q.cpu_of(1);
  q.settle({true, true, true});  // rank 0 comes back beside one of them; the others stay where they are
  EXPECT_EQ(q.cpu_of(1), one);
  EXPECT_EQ(q.rates(c, 1.0)[static_cast<size_t>(q.cpu_of(0) == one ? 2 : 1)], 3 * 0.6 / 2);
  CpuRunQueues four(2);  // 4 ranks on 2 CPUs: two a CPU, at(4) each
  four.settle({true, true, true, true});
  for (double x : four.rates(c, 1.0)) EXPECT_NEAR(x, 0.45, 1e-12);
}

// With doctor's slice (CoreSharing::quantum_s) a CPU's ranks take turns: the rank whose turn it is gets the CPU's
// whole share and the others none; a rank that starts on a taken CPU goes first (wake-up preemption); at the end
// of a turn the next queued rank takes it; a CPU left idle pulls a rank whose turn it is not.
TEST(ScheduleSim, CpuRunQueuesTakeTurnsWhereASliceIsMeasured) {
  CoreSharing c;
  c.cpus = 2;
  c.speed = {1.0, 0.9, 0.6, 0.45};
  CpuRunQueues q(2, 4e-3);
  q.settle({true, true, false}, 0.0);
  EXPECT_TRUE(std::isinf(q.next_turn_end()));  // a CPU each: no turns
  EXPECT_EQ(q.rates(c, -1), (std::vector<double>{0.9, 0.9, 0.0}));
  q.settle({true, true, true}, 1e-3);  // rank 2 starts on CPU 0 (2 % 2), taken: it goes first
  EXPECT_EQ(q.cpu_of(2), 0);
  EXPECT_TRUE(q.runs(2) && q.runs(1) && !q.runs(0));
  EXPECT_EQ(q.rates(c, -1), (std::vector<double>{0.0, 3 * 0.6 / 2, 3 * 0.6 / 2}));  // a CPU's share: 3 at(3) / 2
  EXPECT_DOUBLE_EQ(q.next_turn_end(), 5e-3);
  q.end_turns(5e-3);  // rank 2's turn ends, rank 0's begins
  EXPECT_TRUE(q.runs(0) && !q.runs(2));
  EXPECT_DOUBLE_EQ(q.next_turn_end(), 9e-3);
  q.settle({true, false, true}, 6e-3);  // rank 1 stops: CPU 1 pulls rank 2, whose turn it was not
  EXPECT_EQ(q.cpu_of(0), 0);
  EXPECT_EQ(q.cpu_of(2), 1);
  EXPECT_TRUE(std::isinf(q.next_turn_end()));
  EXPECT_EQ(q.rates(c, -1), (std::vector<double>{0.9, 0.0, 0.9}));
}

// Turns against sharing at once, simulated pp 3 on 2 CPUs: the same plans; a task run in turns of the CPU's whole
// share ends sooner than one sharing it throughout, so the stages wait longer (bubbles grow). pp 2 is unchanged.
TEST(ScheduleSim, TurnsOnASharedCpuWidenThePipelinesBubbles) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  ClusterSpec at_once = cpu_host({1, 0.9, 0.6, 0.45}), turns = at_once;
  at_once.gpu.measured.sharing.stickiness = {{3, 1.0}};
  turns.gpu.measured.sharing.quantum_s = 4e-3;
  SimLayout pp2, pp3;
  pp2.pipeline = 2, pp3.pipeline = 3;
  const SimResult a = simulate_layout(s, at_once, w, pp3), b = simulate_layout(s, turns, w, pp3);
  ASSERT_TRUE(a.fits && b.fits) << a.why_not << b.why_not;
  EXPECT_EQ(a.plans, b.plans);
  double bubble_a = 0, bubble_b = 0;  // summed over the stages
  for (size_t i = 0; i < 3; ++i) bubble_a += a.stages[i].bubble, bubble_b += b.stages[i].bubble;
  EXPECT_GT(bubble_b, bubble_a + 0.01) << bubble_a << " vs " << bubble_b;
  EXPECT_EQ(simulate_layout(s, at_once, w, pp2).elapsed_s, simulate_layout(s, turns, w, pp2).elapsed_s);

  // The kept spans say where each compute ran and the turns it lost, as a run's trace does: pp 3 on 2 CPUs
  // loses turns, pp 2 (a CPU each) none; send spans say neither.
  int lost = 0, computes = 0;
  for (const SimSpan& x : simulate_layout(s, turns, w, pp3, /*record=*/true).spans) {
    EXPECT_TRUE(x.send ? x.cpu == -1 && x.preempted == -1 : (x.cpu == 0 || x.cpu == 1) && x.preempted >= 0);
    computes += !x.send, lost += x.send ? 0 : x.preempted;
  }
  EXPECT_GT(computes, 0);
  EXPECT_GT(lost, 0);
  for (const SimSpan& x : simulate_layout(s, turns, w, pp2, /*record=*/true).spans) EXPECT_LE(x.preempted, 0);
}

// In a simulated pp 3 on 2 CPUs: stickiness 0 is processor sharing to the last bit; with the run queues
// kept (stickiness 1) the plans are the same, the stages no longer slow down alike, and pp 2 (never
// more ranks than CPUs) does not change. TP layouts keep cpu_node_rates.
TEST(ScheduleSim, RunQueuesMoveAPipelinesBubblesNotItsPlans) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  ClusterSpec ps = cpu_host({1, 0.9, 0.6, 0.45}), loose = ps, sticky = ps;
  loose.gpu.measured.sharing.stickiness = {{3, 0.0}};
  sticky.gpu.measured.sharing.stickiness = {{3, 1.0}, {4, 1.0}};
  SimLayout pp2, pp3, tp2;
  pp2.pipeline = 2;
  pp3.pipeline = 3;
  tp2.pipeline = 2, tp2.tensor = 2;
  const SimResult a = simulate_layout(s, ps, w, pp3), b = simulate_layout(s, loose, w, pp3);
  const SimResult c = simulate_layout(s, sticky, w, pp3);
  ASSERT_TRUE(a.fits && c.fits) << a.why_not << c.why_not;
  EXPECT_EQ(a.elapsed_s, b.elapsed_s);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(a.stages[i].bubble, b.stages[i].bubble);
  EXPECT_EQ(a.plans, c.plans);
  double moved = 0;
  for (size_t i = 0; i < 3; ++i) moved = std::max(moved, std::abs(a.stages[i].bubble - c.stages[i].bubble));
  EXPECT_GT(moved, 0.005);
  EXPECT_EQ(simulate_layout(s, ps, w, pp2).elapsed_s, simulate_layout(s, sticky, w, pp2).elapsed_s);
  EXPECT_EQ(simulate_layout(s, ps, w, tp2).elapsed_s, simulate_layout(s, sticky, w, tp2).elapsed_s);
}

// Doctor's ring probe (CoreSharing::pipeline_speed) sets the run queues' speeds where a node holds more
// pipeline ranks than CPUs: pp 3 on 2 CPUs slows with ring speeds below speed(k); pp 1, pp 2 (a CPU each)
// and TP layouts (cpu_node_rates) do not change, nor does anything without the run queues (no stickiness).
TEST(ScheduleSim, PipelineSpeedsSetTheRunQueuesBeyondTheCpus) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  ClusterSpec sticky = cpu_host({1, 0.9, 0.6, 0.45});
  sticky.gpu.measured.sharing.stickiness = {{3, 1.0}, {4, 0.25}};
  ClusterSpec ring = sticky, ring_ps = cpu_host({1, 0.9, 0.6, 0.45});
  ring.gpu.measured.sharing.pipeline_speed = {{3, {0.85, 0.8, 0.55}}, {4, {0.8, 0.7, 0.55, 0.44}}};
  ring_ps.gpu.measured.sharing.pipeline_speed = ring.gpu.measured.sharing.pipeline_speed;
  SimLayout pp1, pp2, pp3, tp2;
  pp2.pipeline = 2;
  pp3.pipeline = 3;
  tp2.pipeline = 2, tp2.tensor = 2;
  const SimResult a = simulate_layout(s, sticky, w, pp3), b = simulate_layout(s, ring, w, pp3);
  ASSERT_TRUE(a.fits && b.fits) << a.why_not << b.why_not;
  EXPECT_EQ(a.plans, b.plans);
  EXPECT_GT(b.elapsed_s, a.elapsed_s * 1.02);
  for (const SimLayout& l : {pp1, pp2, tp2})
    EXPECT_EQ(simulate_layout(s, sticky, w, l).elapsed_s, simulate_layout(s, ring, w, l).elapsed_s);
  const ClusterSpec ps = cpu_host({1, 0.9, 0.6, 0.45});
  EXPECT_EQ(simulate_layout(s, ps, w, pp3).elapsed_s, simulate_layout(s, ring_ps, w, pp3).elapsed_s);
}

// Hops drawn from doctor's samples (CoreSharing::busy_hop_samples_s): the same plans, another timeline; the
// same sample every time is the mean (kHopDraws runs alike); the draws are seeded (the same answer every
// time); pp 1 has no hops and is unchanged, bit for bit.
TEST(ScheduleSim, HopsDrawnFromDoctorsSamples) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  SimLayout pp3;
  pp3.pipeline = 3;
  ClusterSpec mean = cpu_host({1, 0.9, 0.6, 0.45});
  mean.gpu.measured.sharing.busy_hop_s = 2e-3;
  ClusterSpec flat = mean, spread = mean;
  flat.gpu.measured.sharing.busy_hop_samples_s = {2e-3, 2e-3};
  spread.gpu.measured.sharing.busy_hop_samples_s = {0.5e-3, 3.5e-3};
  const SimResult a = simulate_layout(s, mean, w, pp3), b = simulate_layout(s, spread, w, pp3);
  ASSERT_TRUE(a.fits && b.fits) << a.why_not << b.why_not;
  EXPECT_NEAR(a.elapsed_s, simulate_layout(s, flat, w, pp3).elapsed_s, 1e-12 * a.elapsed_s);
  EXPECT_EQ(a.plans, b.plans);
  EXPECT_NE(a.elapsed_s, b.elapsed_s);
  EXPECT_EQ(b.elapsed_s, simulate_layout(s, spread, w, pp3).elapsed_s);
  EXPECT_EQ(simulate_layout(s, mean, w, SimLayout{}).elapsed_s, simulate_layout(s, spread, w, SimLayout{}).elapsed_s);
}

// Hops into a stage that was idle, from a recorded run: how many took `busy_s` or more while fewer than
// `cpus` other stages computed at the message's arrival (the node then had a CPU free).
int busy_hops_with_a_cpu_free(const SimResult& r, int cpus, double busy_s) {
  std::map<std::pair<int, int64_t>, SimSpan> compute, send;
  for (const SimSpan& x : r.spans) (x.send ? send : compute)[{x.stage, x.step}] = x;
  int n = 0;
  for (const auto& [key, x] : compute) {
    const auto [stage, step] = key;
    if (stage == 0) continue;
    const double arrival = send.at({stage - 1, step}).end_s;
    bool idle = true;
    int others = 0;
    for (const auto& [k2, y] : compute) {
      if (k2.first == stage && y.step < step && y.end_s > arrival) idle = false;
      if (k2.first != stage && y.begin_s <= arrival && arrival < y.end_s) ++others;
    }
    if (idle && others < cpus && x.begin_s - arrival >= busy_s * 0.999) ++n;
  }
  return n;
}

// Where the run queues are simulated, a hop takes doctor's busy hop also while another rank computes on the
// CPU the receiver naps on, as doctor's busy probe has it (its idle probe's receiver naps on a CPU of its
// own): at pp 3 on 2 CPUs ranks 0 and 2 start on CPU 0, so some hops into an idle stage meet one rank
// computing and still take the busy hop; at pp 2 (a CPU each) none does.
TEST(ScheduleSim, BusyHopWhereTheReceiversCpuIsTaken) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  const SimWorkload w = cpu_workload();
  ClusterSpec c = cpu_host({1, 0.9, 0.6, 0.45});
  CoreSharing& sh = c.gpu.measured.sharing;
  sh.stickiness = {{3, 1.0}, {4, 1.0}};
  sh.hop_s = 0.1e-3, sh.busy_hop_s = 3e-3;
  sh.hop_samples_s.clear(), sh.busy_hop_samples_s.clear();
  SimLayout pp2, pp3;
  pp2.pipeline = 2;
  pp3.pipeline = 3;
  const SimResult a = simulate_layout(s, c, w, pp3, /*record=*/true), b = simulate_layout(s, c, w, pp2, true);
  ASSERT_TRUE(a.fits && b.fits) << a.why_not << b.why_not;
  EXPECT_GT(busy_hops_with_a_cpu_free(a, 2, sh.busy_hop_s), 0);
  EXPECT_EQ(busy_hops_with_a_cpu_free(b, 2, sh.busy_hop_s), 0);
}

// `conveyor plan --trace`: the spans a simulated run keeps are its stages' tasks (the stage occupied:
// compute, all-reduces, host overhead), in order on each stage, one per plan and stage; the usage a run's
// summary computes from such spans gives the simulator's own shares.
TEST(ScheduleSim, RecordedSpansAreTheStagesTasks) {
  const ModelSpec s = model("cpu-sim-16l.yaml");
  SimLayout pp3;
  pp3.pipeline = 3;
  const SimWorkload w = cpu_workload();
  const ClusterSpec c = cpu_host({1, 0.9, 0.6, 0.45});
  const SimResult plain = simulate_layout(s, c, w, pp3);
  const SimResult r = simulate_layout(s, c, w, pp3, /*record=*/true);
  ASSERT_TRUE(r.fits) << r.why_not;
  EXPECT_TRUE(plain.spans.empty());
  EXPECT_DOUBLE_EQ(r.elapsed_s, plain.elapsed_s);
  std::vector<RankTimeline> ranks(3);
  for (const SimSpan& x : r.spans) {
    ASSERT_GE(x.stage, 0);
    ASSERT_LT(x.stage, 3);
    ranks[static_cast<size_t>(x.stage)].stage = x.stage;
    ranks[static_cast<size_t>(x.stage)].rank = x.stage;
    ranks[static_cast<size_t>(x.stage)].spans.push_back(
        Span{x.step, x.send ? Phase::kSend : Phase::kCompute, x.begin_s, x.end_s, x.tokens});
  }
  for (size_t st = 0; st < 3; ++st) {
    double compute = 0, last_end = 0;
    int64_t n = 0, step = -1;
    for (const Span& x : ranks[st].spans) {
      if (x.phase != Phase::kCompute) continue;
      EXPECT_GE(x.begin_s, last_end - 1e-12) << "stage " << st << " computes one plan at a time";
      EXPECT_GT(x.step, step) << "stage " << st << " takes the plans in order";
      EXPECT_GT(x.tokens, 0);
      compute += x.end_s - x.begin_s, last_end = x.end_s, step = x.step, ++n;
    }
    EXPECT_EQ(n, r.plans) << "stage " << st;
    const SimStage& ss = r.stages[st];
    EXPECT_NEAR(compute, ss.compute_s + ss.allreduce_s + ss.overhead_s, 1e-9 * compute) << "stage " << st;
  }
  const PipelineUsage usage = summarize_usage(ranks);
  for (size_t st = 0; st < 3; ++st) {
    const SimStage& ss = r.stages[st];
    EXPECT_NEAR(usage.stages[st].busy_pct, 100.0 * (ss.compute_s + ss.allreduce_s + ss.overhead_s) / usage.window_s, 1e-6);
  }
}

}  // namespace
}  // namespace conveyor
