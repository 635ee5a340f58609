// `conveyor plan --cluster`'s pieces: the cluster file (presets, overrides, errors naming the key), the
// workload text, FP8 halving weight bytes, the layout search on 64 H200 x Llama-3.1-405B (every layout
// the heads allow, ranked, with a reason and an srun line; the work done bounded by the plans the
// scheduler must make), and the published ordering that pipeline parallel 8 beats tensor parallel 8 in
// throughput for 405B in FP8 while tensor parallel has the lower TPOT.
#include "stages/sim/cluster_plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

std::string configs(const std::string& rel) { return testing::source_dir() + "/configs/" + rel; }

std::string write_yaml(const std::string& name, const std::string& text) {
  const std::string path = testing::temp_dir("cluster_plan_test") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ClusterSpec, PresetsAndOverrides) {
  const ClusterSpec c = load_cluster_spec(configs("clusters/h200-8x8-ib.yaml"));
  EXPECT_EQ(c.gpus(), 64);
  EXPECT_TRUE(c.gpu.measured.any());
  EXPECT_DOUBLE_EQ(c.network.bandwidth, 45e9);
  const ClusterSpec h = load_cluster_spec(write_yaml(
      "h.yaml", "nodes: 3\ngpus_per_node: 4\ngpu: {preset: h100, memory_gib: 64}\nnetwork: {bandwidth_gbps: 7, "
                "latency_us: 30}\nprecision: fp8\n"));
  EXPECT_EQ(h.gpus(), 12);
  EXPECT_DOUBLE_EQ(h.gpu.memory, 64.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(h.network.bandwidth, 7e9);
  EXPECT_DOUBLE_EQ(h.network.latency, 30e-6);
  EXPECT_EQ(h.intra_node.name, "NVLink 4 (H100)");
  EXPECT_DOUBLE_EQ(h.ceilings().flops, 1480e12);
  EXPECT_EQ(h.dtype_bytes(), 1);
}

// In FP8 the prefill GEMM rate is doctor's FP8 linears' where measured, else the bf16 rate scaled to the
// FP8 peak.
TEST(ClusterSpec, Fp8PrefillRateFromDoctorWhereMeasured) {
  ClusterSpec c = load_cluster_spec(configs("clusters/h200-8x8-ib.yaml"));
  c.precision = Precision::kFp8;
  const double bf16 = c.gpu.measured.gemm_prefill_flops;
  ASSERT_GT(bf16, 0);
  EXPECT_DOUBLE_EQ(c.ceilings().measured.gemm_prefill_flops, bf16 * c.fp8_flops / c.gpu.flops);
  c.gpu.measured.gemm_prefill_fp8_flops = 1100e12;
  EXPECT_DOUBLE_EQ(c.ceilings().measured.gemm_prefill_flops, 1100e12);
  c.precision = Precision::kBf16;
  EXPECT_DOUBLE_EQ(c.ceilings().measured.gemm_prefill_flops, bf16);
}

TEST(ClusterSpec, ErrorsNameTheKey) {
  auto message = [](const std::string& text) {
    try {
      load_cluster_spec(write_yaml("bad.yaml", text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("network: ib-ndr-4000\n").find("unknown link preset 'ib-ndr-4000'"), std::string::npos);
  EXPECT_NE(message("precision: fp4\n").find("precision must be bf16 or fp8"), std::string::npos);
  EXPECT_NE(message("gpu: tpu\n").find("unknown GPU preset 'tpu' (presets: h200, h100, cpu)"), std::string::npos);
  EXPECT_NE(message("gpus_pernode: 8\n").find("gpus_pernode: unknown key"), std::string::npos);
  EXPECT_NE(message("nodes: many\n").find("nodes must be a number"), std::string::npos);
}

// A CPU host: every number from the CPU doctor JSON, fp32, links as doctor measured them (the slowest
// edge and TP group), and the errors that keep a CPU and a GPU file apart.
TEST(ClusterSpec, CpuHostFromItsDoctorJson) {
  const std::string doctor = testing::data_path("doctor_cpu.json");
  const ClusterSpec c = load_cluster_spec(write_yaml(
      "cpu.yaml", "nodes: 1\ngpus_per_node: 4\ngpu: {preset: cpu, doctor_json: " + doctor + "}\n"));
  EXPECT_TRUE(c.cpu());
  EXPECT_EQ(c.precision, Precision::kFp32);
  EXPECT_EQ(c.dtype_bytes(), 4);
  EXPECT_DOUBLE_EQ(c.gpu.flops, 0.02e12);
  EXPECT_DOUBLE_EQ(c.ceilings().flops, 0.02e12);
  EXPECT_DOUBLE_EQ(c.gpu.bandwidth, 12e9);
  EXPECT_DOUBLE_EQ(c.gpu.memory, 16.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(c.gpu.measured.step_overhead_s, 40e-6);
  EXPECT_EQ(c.gpu.measured.sharing.speed.size(), 4u);
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth, 2.5e9);
  EXPECT_DOUBLE_EQ(c.intra_node.latency, 5e-6);
  const LinkCosts tp = c.tensor_links();
  EXPECT_DOUBLE_EQ(tp.allreduce_busbw, 1.2e9);
  EXPECT_DOUBLE_EQ(tp.allreduce_latency, 8e-6);
  // One host: no network between nodes to name.
  SimWorkload w;
  w.num_prompts = 4, w.input_len = 8, w.output_len = 4, w.max_num_seqs = 4;
  const ModelSpec spec = load_model_spec(configs("models/cpu-sim-16l.yaml"));
  const std::string printed = format_cluster_plan(spec, c, w, plan_cluster(spec, c, w), 1, "m");
  EXPECT_NE(printed.find("one node: no network"), std::string::npos) << printed;
  auto message = [&](const std::string& text) {
    try {
      load_cluster_spec(write_yaml("bad_cpu.yaml", text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("gpu: cpu\n").find("preset cpu takes its speeds from gpu.doctor_json"), std::string::npos);
  EXPECT_NE(message("gpu: {preset: cpu, doctor_json: " + doctor + "}\nprecision: bf16\n").find("must be fp32 on a CPU"),
            std::string::npos);
  EXPECT_NE(message("precision: fp32\n").find("bf16 or fp8 on a GPU"), std::string::npos);
  EXPECT_NE(message("gpu: {preset: cpu, doctor_json: " + testing::data_path("doctor_measured.json") + "}\n")
                .find("is not a doctor JSON of the CPU backend"),
            std::string::npos);
  EXPECT_NE(message("intra_node: doctor\n").find("'doctor' takes the links of gpu.doctor_json"), std::string::npos);
}

TEST(ClusterPlan, WorkloadText) {
  const SimWorkload w = parse_workload("prompts=7,input=33,output=5,max_num_seqs=3", SimWorkload{});
  EXPECT_EQ(w.num_prompts, 7);
  EXPECT_EQ(w.input_len, 33);
  EXPECT_EQ(w.output_len, 5);
  EXPECT_EQ(w.max_num_seqs, 3);
  EXPECT_THROW(parse_workload("prompt=7", SimWorkload{}), Error);
  EXPECT_THROW(parse_workload("input=0", SimWorkload{}), Error);
  EXPECT_THROW(parse_workload("input=3x", SimWorkload{}), Error);
}

TEST(ClusterPlan, Fp8HalvesTheLayersWeightBytes) {
  const ModelSpec s = load_model_spec(configs("models/llama-3.1-70b.yaml"));
  ClusterSpec c = load_cluster_spec(configs("clusters/h200-8-fp8.yaml"));
  SimWorkload w;
  w.num_prompts = 4, w.input_len = 64, w.output_len = 4;
  const SimResult fp8 = simulate_layout(s, c, w, SimLayout{});
  c.precision = Precision::kBf16;
  const SimResult bf16 = simulate_layout(s, c, w, SimLayout{});
  EXPECT_TRUE(fp8.fits) << fp8.why_not;
  EXPECT_FALSE(bf16.fits);  // 141 GB of bf16 weights on one H200
  // The layers' linears in e4m3; the embedding table and the untied LM head stay in bf16, as the runtime keeps
  // them (`--quantization fp8`).
  const double heads = 2.0 * static_cast<double>(s.vocab) * s.hidden * 2;
  EXPECT_GT(fp8.stages[0].weight_bytes, heads);
  EXPECT_NEAR(2 * (fp8.stages[0].weight_bytes - heads), bf16.stages[0].weight_bytes - heads, 1.0);
}

TEST(ClusterPlan, SixtyFourH200Llama405B) {
  const ModelSpec s = load_model_spec(configs("models/llama-3.1-405b.yaml"));
  const ClusterSpec c = load_cluster_spec(configs("clusters/h200-8x8-ib.yaml"));
  SimWorkload w;  // 1,000 prompts of 1024 in / 1024 out, 256 sequences
  const ClusterPlan plan = plan_cluster(s, c, w);
  // tp 1, 2, 4, 8 x every pipeline dividing 64 / tp (up to 126 layers) x M in {pp, 2 pp}: 7+6+5+4 pipelines.
  EXPECT_EQ(plan.layouts.size(), 2u * (7 + 6 + 5 + 4) - 4u);
  ASSERT_TRUE(plan.layouts.front().sim.fits);
  for (size_t i = 0; i + 1 < plan.layouts.size(); ++i) {
    const SimResult& a = plan.layouts[i].sim;
    const SimResult& b = plan.layouts[i + 1].sim;
    EXPECT_TRUE(a.fits || !b.fits);
    if (a.fits && b.fits) {
      EXPECT_GE(a.output_tokens_per_s, b.output_tokens_per_s);
    }
    EXPECT_FALSE(plan.layouts[i].reason.empty());
  }
  // The work done: per fitting layout, at least one plan per output token and at most one per
  // (micro-batch slot, token) of every wave of max_num_seqs, with room for prefill-only plans.
  int64_t plans = 0;
  for (const RankedLayout& r : plan.layouts) {
    if (!r.sim.fits) continue;
    const int64_t M = r.sim.layout.micro_batches, R = r.sim.replica_requests;
    const int64_t waves = (R + w.max_num_seqs - 1) / w.max_num_seqs;
    EXPECT_GE(r.sim.plans, w.output_len);
    EXPECT_LE(r.sim.plans, 2 * M * waves * (w.output_len + w.input_len * w.max_num_seqs / w.max_num_batched_tokens + 1));
    plans += r.sim.plans;
  }
  EXPECT_EQ(plans, plan.simulated_plans);
  const std::string line = slurm_line(c, plan.layouts.front().sim.layout, "configs/models/llama-3.1-405b.yaml");
  EXPECT_NE(line.find("srun --mpi=pmix -N 8 --ntasks-per-node=8"), std::string::npos) << line;
  // An FP8 cluster's run line asks for FP8 weights and KV; a bf16 one for neither.
  ClusterSpec fp8 = c;
  fp8.precision = Precision::kFp8;
  EXPECT_NE(slurm_line(fp8, plan.layouts.front().sim.layout, "m.yaml").find("--quantization fp8 --kv-cache-dtype fp8"),
            std::string::npos);
  fp8.precision = Precision::kBf16;
  EXPECT_EQ(slurm_line(fp8, plan.layouts.front().sim.layout, "m.yaml").find("--kv-cache-dtype"), std::string::npos);
}

TEST(ClusterPlan, Llama405BPipelineBeatsTensorInThroughputTensorWinsLatency) {
  const ModelSpec s = load_model_spec(configs("models/llama-3.1-405b.yaml"));
  const ClusterSpec c = load_cluster_spec(configs("clusters/h200-8-fp8.yaml"));
  SimWorkload w;
  w.num_prompts = 1024, w.input_len = 1000, w.output_len = 1000, w.max_num_seqs = 1024;
  SimLayout pp8, tp8;
  pp8.pipeline = 8;
  tp8.tensor = 8;
  const SimResult p = simulate_layout(s, c, w, pp8), t = simulate_layout(s, c, w, tp8);
  ASSERT_TRUE(p.fits && t.fits);
  EXPECT_GT(p.output_tokens_per_s, t.output_tokens_per_s);
  SimWorkload one;
  one.num_prompts = 1, one.input_len = 1000, one.output_len = 100;
  EXPECT_LT(simulate_layout(s, c, one, tp8).tpot_p50, simulate_layout(s, c, one, pp8).tpot_p50);
}

}  // namespace
}  // namespace conveyor
