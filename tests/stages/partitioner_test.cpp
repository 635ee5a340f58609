// Partitioner: the min-max split is optimal (checked against brute force on random costs), overrides are
// validated, and the planner gives the last stage of Llama-3-70B fewer layers (it also runs the LM head).
// Layout prediction: a one-GPU decode step equals the hand-computed roofline, TP adds exactly its
// all-reduces, and the ranking follows the pipelining tax (tp wins memory-bound, pp compute-bound).
// With doctor's measured speeds (tests/data/doctor_measured.json) every term of a step is hand-computed.
#include "stages/partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

double max_stage(const std::vector<double>& cost, const std::vector<int>& counts, double first, double last) {
  double worst = 0;
  size_t i = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    double t = (s == 0 ? first : 0.0) + (s + 1 == counts.size() ? last : 0.0);
    for (int k = 0; k < counts[s]; ++k) t += cost[i++];
    worst = std::max(worst, t);
  }
  return worst;
}

double brute_force(const std::vector<double>& cost, int stages, double first, double last) {
  double best = 1e300;
  std::vector<int> counts(stages);
  std::function<void(int, int)> rec = [&](int s, int left) {
    if (s == stages - 1) {
      if (left < 1) return;
      counts[s] = left;
      best = std::min(best, max_stage(cost, counts, first, last));
      return;
    }
    for (int c = 1; c <= left - (stages - 1 - s); ++c) {
      counts[s] = c;
      rec(s + 1, left - c);
    }
  };
  rec(0, static_cast<int>(cost.size()));
  return best;
}

TEST(Partitioner, MinMaxSplitIsOptimal) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 11);
    int stages = 1 + static_cast<int>(rng() % n);
    std::vector<float> r = testing::random_floats(n + 2, 100 + trial, 0.1f, 3.0f);
    std::vector<double> cost(r.begin(), r.begin() + n);
    std::vector<int> counts = min_max_split(cost, stages, r[n], r[n + 1]);
    ASSERT_EQ(static_cast<int>(counts.size()), stages);
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), n);
    for (int c : counts) EXPECT_GE(c, 1);
    EXPECT_NEAR(max_stage(cost, counts, r[n], r[n + 1]), brute_force(cost, stages, r[n], r[n + 1]), 1e-9)
        << "trial " << trial;
  }
  EXPECT_THROW(min_max_split({1.0, 1.0}, 3, 0, 0), Error);
}

TEST(Partitioner, OverrideIsChecked) {
  EXPECT_NO_THROW(check_partition({1, 3, 1}, 3, 5));
  EXPECT_THROW(check_partition({2, 3}, 3, 5), Error);
  EXPECT_THROW(check_partition({2, 0, 3}, 3, 5), Error);
  try {
    check_partition({2, 2, 2}, 3, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sums to 6 layers but the model has 5"), std::string::npos) << e.what();
  }
}

ModelSpec llama3_70b() {
  return load_model_spec(testing::source_dir() + "/configs/models/llama-3-70b.yaml");
}

TEST(Partitioner, Llama70bLastStageGetsFewerLayers) {
  ModelSpec spec = llama3_70b();
  Workload w;
  w.pipeline = 4;
  w.tensor = 2;
  PartitionPlan plan = plan_partition(spec, w, DeviceCeilings{}, {});
  ASSERT_EQ(plan.stages.size(), 4u);
  ASSERT_TRUE(plan.fits) << plan.why_not;
  int last = plan.stages[3].last_layer - plan.stages[3].first_layer;
  for (int s = 0; s < 3; ++s) EXPECT_LT(last, plan.stages[s].last_layer - plan.stages[s].first_layer);
  EXPECT_EQ(plan.stages[3].last_layer, 80);
  // Bubbles: the busiest stage has none; none is negative.
  double min_bubble = 1;
  for (const auto& c : plan.stages) {
    EXPECT_GE(c.bubble, -1e-12);
    min_bubble = std::min(min_bubble, c.bubble);
  }
  EXPECT_NEAR(min_bubble, 0.0, 1e-12);
}

TEST(Partitioner, SeventyBillionDoesNotFitOneGpu) {
  Workload w;
  PartitionPlan plan = plan_partition(llama3_70b(), w, DeviceCeilings{}, {});
  EXPECT_FALSE(plan.fits);
  EXPECT_NE(plan.why_not.find("stage 0"), std::string::npos) << plan.why_not;
}

TEST(Partitioner, UserPartitionIsUsed) {
  Workload w;
  w.pipeline = 4;
  w.tensor = 2;
  PartitionPlan plan = plan_partition(llama3_70b(), w, DeviceCeilings{}, {10, 30, 30, 10});
  EXPECT_EQ(plan.stages[1].first_layer, 10);
  EXPECT_EQ(plan.stages[3].first_layer, 70);
  EXPECT_GT(plan.stages[3].bubble, plan.stages[1].bubble);
}

ModelSpec llama3_8b() { return load_model_spec(testing::source_dir() + "/configs/models/llama-3-8b.yaml"); }

// Links that cost nothing, to isolate the compute/memory part of a prediction.
LinkCosts free_links() {
  LinkCosts l;
  l.allreduce_busbw = l.p2p_bandwidth = 1e30;
  l.allreduce_latency = l.p2p_latency = 0;
  return l;
}

TEST(LayoutPrediction, OneGpuBatchOneIsTheBandwidthRoofline) {
  const ModelSpec s = llama3_8b();
  CompareWorkload cw;
  cw.batch = 1;
  cw.input_len = 128;
  cw.output_len = 128;
  const DeviceCeilings dev;
  const LayoutPrediction p = predict_layout(s, cw, 1, 1, dev, LinkCosts{});
  // By hand from the Llama-3-8B shape: 32 layers of q/k/v/o (4096 x (4096 + 2 * 1024) + 4096 x 4096), a
  // 14336-wide gated MLP and two norms; the LM head; KV of 8 heads x 128 at context 128 + 64; nine fp32
  // passes over the logits; the embedding row read and written.
  const double layer = 4096.0 * (4096 + 2048) + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;
  const double weights = (32 * layer + 128256.0 * 4096) * 2;
  const double kv = 32 * 192.0 * 2 * 8 * 128 * 2;
  const double bytes = weights + kv + 9 * 128256.0 * 4 + 4096 * 2 * 2;
  EXPECT_NEAR(p.step_time_s, bytes / dev.bandwidth, 1e-12);
  EXPECT_NEAR(p.decode_tokens_per_s, dev.bandwidth / bytes, 1e-6);
  EXPECT_GT(p.decode_tokens_per_s, 270);  // the issue's ~286 tok/s weight roofline, less KV and sampling
  EXPECT_LT(p.decode_tokens_per_s, 286);
  EXPECT_EQ(p.bottleneck, "weights");
  EXPECT_EQ(p.partition, std::vector<int>{32});
  EXPECT_DOUBLE_EQ(p.bubble, 0.0);
  EXPECT_NEAR(p.output_tokens_per_s, 128 / (p.prefill_time_s + 128 * p.step_time_s), 1e-9);
  EXPECT_GT(p.prefill_time_s, 0);
  EXPECT_TRUE(p.fits) << p.why_not;
}

TEST(LayoutPrediction, TensorParallelAddsItsAllReduces) {
  const ModelSpec s = llama3_70b();
  CompareWorkload cw;
  cw.batch = 64;
  LinkCosts links;
  links.allreduce_busbw = 100e9;
  links.allreduce_latency = 20e-6;
  const LayoutPrediction with = predict_layout(s, cw, 1, 4, DeviceCeilings{}, links);
  const LayoutPrediction without = predict_layout(s, cw, 1, 4, DeviceCeilings{}, free_links());
  // Per step: 2 per layer + the embedding's all-reduce of 64 x 8192 bf16, bus share 2 * 3 / 4; the LM
  // head's all-gather of 64 x 128256 fp32 logits, bus share 3 / 4.
  const double ar = 20e-6 + 64.0 * 8192 * 2 * 1.5 / 100e9;
  const double gather = 20e-6 + 64.0 * 128256 * 4 * 0.75 / 100e9;
  EXPECT_NEAR(with.step_time_s - without.step_time_s, (2 * 80 + 1) * ar + gather, 1e-12);
  EXPECT_NEAR(with.allreduce_s, (2 * 80 + 1) * ar + gather, 1e-12);
  EXPECT_LT(without.allreduce_s, 1e-18);  // bytes over an effectively infinite bandwidth
}

TEST(LayoutPrediction, PipeliningTaxDecidesTheLayout) {
  const ModelSpec s = llama3_70b();
  DeviceCeilings dev;
  // Memory-bound (bf16, batch 64): pp=2 reads each stage's weights once per micro-batch, tp=2 once.
  CompareWorkload mem;
  mem.batch = 64;
  std::vector<LayoutPrediction> r = compare_layouts(s, mem, 2, dev, LinkCosts{});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].tensor, 2);
  EXPECT_EQ(r[1].pipeline, 2);
  EXPECT_EQ(r[1].micro_batches, 2);
  EXPECT_GT(r[0].output_tokens_per_s, 1.3 * r[1].output_tokens_per_s);
  EXPECT_NEAR(r[0].per_gpu_tokens_per_s, r[0].output_tokens_per_s / 2, 1e-9);
  // Compute-bound (batch 1024, short context; memory raised so the KV fits): pp=2 skips the all-reduces.
  CompareWorkload big;
  big.batch = 1024;
  big.input_len = 128;
  big.output_len = 1024;
  dev.memory = 1e12;
  r = compare_layouts(s, big, 2, dev, LinkCosts{});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].pipeline, 2);
  EXPECT_EQ(r[0].bottleneck.rfind("compute", 0), 0u) << r[0].bottleneck;
  EXPECT_GT(r[0].output_tokens_per_s, r[1].output_tokens_per_s);
}

TEST(LayoutPrediction, EnumeratesLayoutsThatSplitTheHeads) {
  const ModelSpec s = llama3_70b();  // 64 heads, 8 KV heads, 28672 MLP
  CompareWorkload cw;
  auto layouts = [&](int gpus) {
    std::vector<std::pair<int, int>> got;
    for (const auto& p : compare_layouts(s, cw, gpus, DeviceCeilings{}, LinkCosts{}))
      got.emplace_back(p.pipeline, p.tensor);
    std::sort(got.begin(), got.end());
    return got;
  };
  EXPECT_EQ(layouts(8), (std::vector<std::pair<int, int>>{{1, 8}, {2, 4}, {4, 2}, {8, 1}}));
  EXPECT_EQ(layouts(6), (std::vector<std::pair<int, int>>{{3, 2}, {6, 1}}));
  EXPECT_EQ(layouts(3), (std::vector<std::pair<int, int>>{{3, 1}}));
  // One GPU cannot hold 70B: it is listed, not fitting, with the reason.
  const auto one = compare_layouts(s, cw, 1, DeviceCeilings{}, LinkCosts{});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_FALSE(one[0].fits);
  EXPECT_NE(one[0].why_not.find("weights per rank"), std::string::npos) << one[0].why_not;
  EXPECT_THROW(compare_layouts(s, cw, 0, DeviceCeilings{}, LinkCosts{}), Error);
  // A batch whose KV exceeds the memory left is refused by name, and ranked after those that fit.
  cw.batch = 4096;
  const auto r = compare_layouts(s, cw, 8, DeviceCeilings{}, LinkCosts{});
  for (const auto& p : r) {
    EXPECT_FALSE(p.fits);
    EXPECT_NE(p.why_not.find("the batch needs 8388608"), std::string::npos) << p.why_not;
  }
}

TEST(LayoutPrediction, MoreMicroBatchesThanStagesCostWeightPasses) {
  const ModelSpec s = llama3_70b();
  CompareWorkload cw;
  cw.batch = 64;
  const LayoutPrediction m4 = predict_layout(s, cw, 4, 2, DeviceCeilings{}, free_links());
  cw.micro_batches = 8;
  const LayoutPrediction m8 = predict_layout(s, cw, 4, 2, DeviceCeilings{}, free_links());
  EXPECT_EQ(m4.micro_batches, 4);
  EXPECT_EQ(m8.micro_batches, 8);
  // Memory-bound: twice the micro-batches read every stage's weights twice as often.
  EXPECT_GT(m8.step_time_s, 1.8 * m4.step_time_s);
  EXPECT_EQ(m4.partition.size(), 4u);
  EXPECT_EQ(std::accumulate(m4.partition.begin(), m4.partition.end(), 0), 80);
}

// The hand-written doctor fixture: GEMM m=1/16 5 us + bytes / 4000 GB/s, m=64 6 us / 3600, m=256 8 us /
// 2800; prefill GEMM 700 TFLOP/s; decode attention 10 us + KV bytes / 2500 GB/s; prefill attention 50
// TFLOP/s; 2 us per small kernel in a graph. The host step overhead is the planner's parameter.
DeviceCeilings measured_fixture(double step_overhead_s) {
  std::ifstream in(testing::data_path("doctor_measured.json"));
  DeviceCeilings dev;
  dev.measured = device_profile_from_json(nlohmann::json::parse(in), "doctor_measured.json");
  dev.measured.step_overhead_s = step_overhead_s;
  return dev;
}

TEST(LayoutPrediction, MeasuredSpeedsHandComputed) {
  const ModelSpec s = llama3_8b();
  CompareWorkload cw;
  cw.batch = 1;
  cw.input_len = 128;
  cw.output_len = 128;
  const LayoutPrediction p = predict_layout(s, cw, 1, 1, measured_fixture(100e-6), LinkCosts{});
  // One layer at m = 1 (bucket 1): four GEMMs (q|k|v, o, gate|up, down) of 5 us + (n k + k + n) bf16
  // bytes / 4000 GB/s.
  const double qkv = (6144.0 * 4096 + 4096 + 6144) * 2, o = (4096.0 * 4096 + 4096 + 4096) * 2;
  const double gate_up = (28672.0 * 4096 + 4096 + 28672) * 2, down = (4096.0 * 14336 + 14336 + 4096) * 2;
  const double gemm = 4 * 5e-6 + (qkv + o + gate_up + down) / 4000e9;
  // Paged attention over one sequence's KV at context 128 + 64: 10 us + bytes / 2500 GB/s.
  const double attn = 10e-6 + 192.0 * 2 * 8 * 128 * 2 / 2500e9;
  // Four small kernels at 2 us, their bf16 bytes at 4.28 TB/s: two norms 2 x 4096 each, rope + split +
  // KV write 2 x (4096 + 2 x 1024), SiLU-mul 3 x 14336, the residual read by the accumulating GEMMs 2 x 4096.
  const double row_bytes = 2.0 * (4 * 4096 + 2 * 6144 + 3 * 14336 + 2 * 4096);
  const double small = 4 * 2e-6 + row_bytes / 4.28e12;
  // LM head GEMM into fp32 logits; final norm + row gather (2 kernels, 4 rows of hidden), 8 more fp32
  // passes of sampling; the embedding lookup (1 kernel, a row read and written).
  const double head_gemm = 5e-6 + (128256.0 * 4096 * 2 + 4096 * 2 + 128256 * 4) / 4000e9;
  const double head_small = 2 * 2e-6 + 4.0 * 4096 * 2 / 4.28e12 + 8 * 128256 * 4.0 / 4.28e12;
  const double embed = 2e-6 + 4096.0 * 2 * 2 / 4.28e12;
  const double step = 32 * (gemm + attn + small) + head_gemm + head_small + embed + 100e-6;
  EXPECT_NEAR(p.step_time_s, step, 1e-12);
  EXPECT_NEAR(p.weights_s, 32 * gemm + head_gemm, 1e-12);
  EXPECT_NEAR(p.kv_s, 32 * attn, 1e-12);
  EXPECT_NEAR(p.overhead_s, 32 * small + head_small + embed + 100e-6, 1e-12);
  EXPECT_EQ(p.bottleneck, "weights");
  // Prefill: 128 tokens of projection FLOPs (+ the LM head of the last token) at 700 TFLOP/s, causal
  // attention at 50 TFLOP/s, each row's small-kernel bytes at 4.28 TB/s.
  const double layer = 4096.0 * (4096 + 2048) + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2 * 4096;
  const double prefill = (2.0 * 128 * layer * 32 + 2.0 * 128256 * 4096) / 700e12 +
                         2.0 * 32 * 128 * 128 * 128 * 32 / 50e12 + 128.0 * 32 * row_bytes / 4.28e12;
  EXPECT_NEAR(p.prefill_time_s, prefill, 1e-12);
  EXPECT_NEAR(p.output_tokens_per_s, 128 / (prefill + 128 * step), 1e-9);
  // The ideal roofline of the same workload is the first test's; measured is slower by the terms above.
  const LayoutPrediction ideal = predict_layout(s, cw, 1, 1, DeviceCeilings{}, LinkCosts{});
  const double ideal_step = ((32 * layer + 128256.0 * 4096) * 2 + 32 * 192.0 * 2 * 8 * 128 * 2 +
                             9 * 128256.0 * 4 + 4096 * 2 * 2) / 4.28e12;
  EXPECT_NEAR(ideal.step_time_s, ideal_step, 1e-12);
  EXPECT_NEAR(p.step_time_s / ideal.step_time_s, step / ideal_step, 1e-9);
  EXPECT_GT(p.step_time_s, 1.4 * ideal.step_time_s);
  EXPECT_LT(p.output_tokens_per_s, ideal.output_tokens_per_s / 1.4);
}

// An FP8 cache's decode attention takes doctor's FP8 line (the fixture's 12 us + bytes / 1800 GB/s) where
// it has one, else the bf16 line over the halved bytes; a bf16 cache never reads the FP8 line.
TEST(LayoutPrediction, Fp8CacheTakesTheFp8AttentionLine) {
  const ModelSpec s = llama3_8b();
  const DeviceCeilings with = measured_fixture(0);
  DeviceCeilings without = with;
  without.measured.attention_decode_fp8 = LinearCost{};
  Workload w;
  w.context = 1536;
  w.kv_dtype_bytes = 1;
  const double tokens = 64, kv = tokens * 1536 * 2 * 8 * 128 * 1;  // K and V codes of 8 KV heads of 128
  const double fp8_line = 12e-6 + kv / 1800e9, bf16_line = 10e-6 + kv / 2500e9;
  EXPECT_NEAR(layer_time(s, w, with, tokens) - layer_time(s, w, without, tokens), fp8_line - bf16_line, 1e-12);
  w.kv_dtype_bytes = 2;
  EXPECT_DOUBLE_EQ(layer_time(s, w, with, tokens), layer_time(s, w, without, tokens));
}

// FP8 weights take doctor's FP8 linear curves (device.gemm_decode_fp8) where it measured them, for the four
// projections of a layer; bf16 weights never do.
TEST(LayoutPrediction, Fp8WeightsTakeTheFp8LinearCurves) {
  const ModelSpec s = llama3_8b();
  const DeviceCeilings without = measured_fixture(0);
  DeviceCeilings with = without;
  for (int64_t m : {1, 16, 64, 256})
    with.measured.gemm_decode_fp8.push_back(GemmBucket{m, LinearCost{9e-6, 1500e9}, 0, {}});
  with.measured.gemm_prefill_fp8_flops = 1200e12;
  Workload w;
  w.context = 1024;
  w.weight_dtype_bytes = 1;
  const double tokens = 64;
  double fp8 = 0, bf16_curve = 0;
  const DeviceProfile& p = with.measured;
  for (const auto& [n, k] : std::vector<std::pair<double, double>>{{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}) {
    fp8 += p.gemm_time(tokens, n, k, 1, 2, 1200e12, true);
    bf16_curve += p.gemm_time(tokens, n, k, 1, 2, p.gemm_prefill_flops);
  }
  EXPECT_GT(fp8 - bf16_curve, 1e-6);  // the fixture's bf16 curves are faster than 1,500 GB/s + 9 us
  EXPECT_NEAR(layer_time(s, w, with, tokens) - layer_time(s, w, without, tokens), fp8 - bf16_curve, 1e-12);
  w.weight_dtype_bytes = 2;
  EXPECT_DOUBLE_EQ(layer_time(s, w, with, tokens), layer_time(s, w, without, tokens));
}

TEST(LayoutPrediction, MeasuredDecodePadsToTheGraphBucket) {
  const ModelSpec s = llama3_8b();
  CompareWorkload cw;
  cw.input_len = cw.output_len = 1024;
  const DeviceCeilings dev = measured_fixture(0);
  cw.batch = 200;
  const LayoutPrediction b200 = predict_layout(s, cw, 1, 1, dev, LinkCosts{});
  cw.batch = 256;
  const LayoutPrediction b256 = predict_layout(s, cw, 1, 1, dev, LinkCosts{});
  ASSERT_TRUE(b200.fits && b256.fits) << b200.why_not << b256.why_not;
  // 200 sequences run the graph of 256 (stages/decode_graphs.h): the same GEMMs, small kernels, LM head;
  // attention reads only the real sequences' KV (context 1024 + 512).
  EXPECT_DOUBLE_EQ(b200.weights_s, b256.weights_s);
  EXPECT_DOUBLE_EQ(b200.overhead_s, b256.overhead_s);
  EXPECT_NEAR(b200.kv_s, 32 * (10e-6 + 200.0 * 1536 * 2 * 8 * 128 * 2 / 2500e9), 1e-12);
  EXPECT_NEAR(b256.kv_s, 32 * (10e-6 + 256.0 * 1536 * 2 * 8 * 128 * 2 / 2500e9), 1e-12);
  // The m = 256 bucket: gate/up alone is 8 us + its bytes / 2800 GB/s (the FLOP ceiling is lower).
  const double gate_up = 8e-6 + (28672.0 * 4096 + 256.0 * 4096 + 256.0 * 28672) * 2 / 2800e9;
  EXPECT_GT(gate_up, 2.0 * 256 * 28672 * 4096 / 700e12);
  EXPECT_GT(b256.weights_s, 32 * gate_up);
}

TEST(LayoutPrediction, StepOverheadIsPaidPerStageAndMicroBatch) {
  const ModelSpec s = llama3_70b();
  Workload w;
  w.pipeline = 2;
  w.batch = 64;
  DeviceCeilings dev;
  const PartitionPlan base = plan_partition(s, w, dev, {});
  dev.measured.step_overhead_s = 300e-6;  // nothing measured: the roofline plus the host's share
  const PartitionPlan slow = plan_partition(s, w, dev, {});
  ASSERT_EQ(slow.stages.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(slow.stages[i].time_s - base.stages[i].time_s, 300e-6, 1e-15);
  EXPECT_NEAR(slow.step_time_s - base.step_time_s, 2 * 300e-6, 1e-12);  // M = 2 micro-batches on the busiest
}

// The CPU fixture (tests/data/doctor_cpu.json): matmul m=4 2 us + bytes / 8 GB/s, m=16 3 us / 2.5, fp32;
// attention 1 us + KV bytes / 8 GB/s; small ops 0.5 us + bytes / 20 GB/s; greedy sampling 3 us + logit
// bytes / 4 GB/s per row. The CPU backend runs the rows there are (no graph buckets).
TEST(LayoutPrediction, CpuDecodeRunsItsRowsInFp32) {
  const ModelSpec s = load_model_spec(testing::source_dir() + "/configs/models/cpu-sim-16l.yaml");
  std::ifstream in(testing::data_path("doctor_cpu.json"));
  DeviceCeilings dev;
  dev.measured = device_profile_from_json(nlohmann::json::parse(in), "doctor_cpu.json");
  dev.flops = 0.02e12, dev.bandwidth = 12e9;
  Workload w;
  w.dtype_bytes = w.kv_dtype_bytes = w.weight_dtype_bytes = 4;
  w.context = 100;
  // Five rows: 1/12 of the way from the m=4 curve to the m=16 one, each at its fp32 bytes.
  auto gemm = [](double n, double k) {
    const double bytes = (n * k + 5 * k) * 4 + 5 * n * 4;
    return 11.0 / 12 * (2e-6 + bytes / 8e9) + 1.0 / 12 * (3e-6 + bytes / 2.5e9);
  };
  const double gemms = gemm(1024, 512) + gemm(512, 512) + gemm(3072, 512) + gemm(512, 1536);
  const double attn = 1e-6 + 5.0 * 100 * 2 * 4 * 64 * 4 / 8e9;
  const double small = 4 * 0.5e-6 + 5.0 * 4 * (4 * 512 + 2 * 1024 + 3 * 1536 + 2 * 512) / 20e9;
  EXPECT_NEAR(layer_time(s, w, dev, 5), gemms + attn + small, 1e-15);
  const double head_bytes = (8192.0 * 512 + 5 * 512) * 4 + 5 * 8192 * 4.0;
  const double head = 11.0 / 12 * (2e-6 + head_bytes / 8e9) + 1.0 / 12 * (3e-6 + head_bytes / 2.5e9) + 2 * 0.5e-6 +
                      4.0 * 5 * 512 * 4 / 20e9 + 5 * (3e-6 + 8192 * 4.0 / 4e9);
  EXPECT_NEAR(head_time(s, w, dev, 5), head, 1e-15);
  EXPECT_LT(layer_time(s, w, dev, 5), layer_time(s, w, dev, 8));  // no padding to the bucket of 8
}

}  // namespace
}  // namespace conveyor
