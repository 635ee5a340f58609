// StageOptions and plan_layout: the options carry every key the stages read; the split `conveyor plan`
// prints (its options from the config, the ceilings of parallel.device_profile) is the one the run
// takes (make_pipeline_stage: plan_layout over planning_ceilings; layout_plan_mpi_test runs it), and
// with doctor's measured speeds that split differs from the roofline one the run used to take.
#include "stages/layout_plan.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <utility>

#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

ModelSpec llama3_70b() { return load_model_spec(testing::source_dir() + "/configs/models/llama-3-70b.yaml"); }

TEST(StageOptions, FromConfigReadsEveryKey) {
  Config cfg;
  cfg.set("parallel.pipeline", "4", "test");
  cfg.set("parallel.tensor", "2", "test");
  cfg.set("parallel.micro_batches", "6", "test");
  cfg.set("parallel.partition", "[20, 20, 20, 20]", "test");
  cfg.set("parallel.device_profile", "d.json", "test");
  cfg.set("scheduler.max_num_seqs", "48", "test");
  cfg.set("scheduler.max_num_batched_tokens", "1000", "test");
  cfg.set("cache.block_size", "32", "test");
  cfg.set("cache.num_blocks", "77", "test");
  cfg.set("cache.cpu_kv_cache_space", "1.5", "test");
  cfg.set("cache.gpu_memory_utilization", "0.75", "test");
  cfg.set("cache.kv_cache_dtype", "float16", "test");
  cfg.set("model.dtype", "float16", "test");
  cfg.set("model.load_format", "dummy", "test");
  cfg.set("model.path", "/m", "test");
  cfg.set("runtime.seed", "9", "test");
  cfg.set("runtime.cuda_graphs", "false", "test");
  cfg.set("runtime.profile_step", "5", "test");
  const StageOptions o = StageOptions::from_config(cfg);
  EXPECT_EQ(o.pipeline, 4);
  EXPECT_EQ(o.tensor, 2);
  EXPECT_EQ(o.micro_batches, 6);
  EXPECT_EQ(o.partition, (std::vector<int64_t>{20, 20, 20, 20}));
  EXPECT_EQ(o.device_profile, "d.json");
  EXPECT_EQ(o.max_num_seqs, 48);
  EXPECT_EQ(o.max_num_batched_tokens, 1000);
  EXPECT_EQ(o.block_size, 32);
  EXPECT_EQ(o.num_blocks, 77);
  EXPECT_DOUBLE_EQ(o.cpu_kv_cache_space_gib, 1.5);
  EXPECT_DOUBLE_EQ(o.gpu_memory_utilization, 0.75);
  EXPECT_EQ(o.kv_cache_dtype, "float16");
  EXPECT_EQ(o.dtype, "float16");
  EXPECT_TRUE(o.weights.dummy);
  EXPECT_EQ(o.weights.path, "/m");
  EXPECT_EQ(o.weights.seed, 9u);
  EXPECT_FALSE(o.cuda_graphs);
  EXPECT_EQ(o.profile_step, 5);
}

TEST(StageOptions, DefaultsMatchTheDefaultConfig) {
  const StageOptions d;
  const StageOptions c = StageOptions::from_config(Config());
  EXPECT_EQ(d.pipeline, c.pipeline);
  EXPECT_EQ(d.tensor, c.tensor);
  EXPECT_EQ(d.micro_batches, c.micro_batches);
  EXPECT_EQ(d.partition, c.partition);
  EXPECT_EQ(d.device_profile, c.device_profile);
  EXPECT_EQ(d.max_num_seqs, c.max_num_seqs);
  EXPECT_EQ(d.max_num_batched_tokens, c.max_num_batched_tokens);
  EXPECT_EQ(d.block_size, c.block_size);
  EXPECT_EQ(d.num_blocks, c.num_blocks);
  EXPECT_DOUBLE_EQ(d.cpu_kv_cache_space_gib, c.cpu_kv_cache_space_gib);
  EXPECT_DOUBLE_EQ(d.gpu_memory_utilization, c.gpu_memory_utilization);
  EXPECT_EQ(d.kv_cache_dtype, c.kv_cache_dtype);
  EXPECT_EQ(d.dtype, c.dtype);
  EXPECT_EQ(d.weights.dummy, c.weights.dummy);
  EXPECT_EQ(d.weights.seed, c.weights.seed);
  EXPECT_EQ(d.cuda_graphs, c.cuda_graphs);
  EXPECT_EQ(d.profile_step, c.profile_step);
}

TEST(MicroBatches, DefaultIsOnePerStage) {
  EXPECT_EQ(micro_batches_for(0, 4), 4);
  EXPECT_EQ(micro_batches_for(3, 4), 3);
  EXPECT_EQ(micro_batches_for(8, 1), 8);
}

TEST(LayoutPlan, WorkloadComesFromTheOptions) {
  StageOptions o;
  o.pipeline = 4;
  o.tensor = 2;
  o.micro_batches = 3;
  o.max_num_seqs = 96;
  const ModelSpec spec = llama3_70b();
  const LayoutPlan p = plan_layout(o, spec, DeviceCeilings{}, 1234);
  EXPECT_EQ(p.workload.batch, 96);
  EXPECT_EQ(p.workload.context, 1234);
  EXPECT_EQ(p.workload.pipeline, 4);
  EXPECT_EQ(p.workload.tensor, 2);
  EXPECT_EQ(p.workload.micro_batches, 3);
  const PartitionPlan direct = plan_partition(spec, p.workload, DeviceCeilings{}, {});
  ASSERT_EQ(p.partition.stages.size(), direct.stages.size());
  int64_t next = 0, sum = 0;
  for (size_t s = 0; s < direct.stages.size(); ++s) {
    EXPECT_EQ(p.partition.stages[s].first_layer, direct.stages[s].first_layer);
    EXPECT_EQ(p.partition.stages[s].last_layer, direct.stages[s].last_layer);
    EXPECT_EQ(p.stage_ranges()[s][0], next);
    next = p.stage_ranges()[s][1];
    sum += p.layer_counts()[s];
  }
  EXPECT_EQ(sum, spec.layers);
  EXPECT_EQ(Workload{}.context, plan_layout(o, spec, DeviceCeilings{}).workload.context);  // the run's context
}

// scheduler.max_num_seqs auto: the split is the one planned at kAutoPlanningBatch (what the run splits
// with), and the batch is what the smallest stage's KV room holds of sequences of 2048 tokens, at most
// the GPU cap: with CUDA graphs the decode graphs' reach (256 per micro-batch, 2 micro-batches here),
// without them 1024; a batch the user sets wins.
TEST(LayoutPlan, AutoBatchComesFromTheKvRoomOnTheRunsSplit) {
  const ModelSpec spec = llama3_70b();
  StageOptions o;
  o.pipeline = 2;
  o.tensor = 4;
  StageOptions planning = o;
  planning.max_num_seqs = kAutoPlanningBatch;
  for (double gib : {140.0, 32.0}) {
    DeviceCeilings dev;
    dev.memory = gib * (1ull << 30);
    const LayoutPlan p = plan_layout(o, spec, dev);
    const LayoutPlan split = plan_layout(planning, spec, dev);
    EXPECT_EQ(p.layer_counts(), split.layer_counts());
    const int64_t kv = plan_kv_tokens(split.partition, o.block_size);
    EXPECT_EQ(p.kv_tokens, kv);
    EXPECT_EQ(p.request.seq_len, 2048);
    EXPECT_EQ(p.workload.batch, std::min<int64_t>(512, kv / 2048)) << gib << " GiB";
    EXPECT_EQ(p.batch.budget.max_num_seqs, p.workload.batch);
    EXPECT_EQ(p.batch.budget.max_num_batched_tokens, std::max<int64_t>(8192, p.workload.batch));
    EXPECT_FALSE(p.batch.seqs_from_user);
    if (gib < 100) EXPECT_LT(p.workload.batch, 512) << "a small GPU holds fewer sequences";
    else EXPECT_EQ(p.workload.batch, 512);
    StageOptions eager = o;
    eager.cuda_graphs = false;
    EXPECT_EQ(plan_layout(eager, spec, dev).workload.batch, std::min<int64_t>(1024, kv / 2048)) << gib << " GiB";
  }
  o.max_num_seqs = 96;
  const LayoutPlan user = plan_layout(o, spec, DeviceCeilings{});
  EXPECT_EQ(user.workload.batch, 96);
  EXPECT_TRUE(user.batch.seqs_from_user);
}

// The GPU candidates stop where a micro-batch's decode step would leave the CUDA graphs (256 sequences
// each), unless graphs are off.
TEST(LayoutPlan, GpuAutoBatchStaysWithinTheDecodeGraphs) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(gpu_batch_rule_for(true, 1).seq_candidates, (V{256, 128, 64, 32, 16, 8, 4, 2, 1}));
  EXPECT_EQ(gpu_batch_rule_for(true, 3).seq_candidates, (V{768, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1}));
  EXPECT_EQ(gpu_batch_rule_for(true, 4).seq_candidates.front(), 1024);
  EXPECT_EQ(gpu_batch_rule_for(false, 1).seq_candidates, gpu_batch_rule().seq_candidates);
}

// Llama-3-70B at pp 2 x tp 4 split 40/40 (an FP8 choice may move the split itself: compare like with
// like), planned as given and after `change`.
std::pair<LayoutPlan, LayoutPlan> plan_70b_pp2_tp4(const std::function<void(StageOptions&)>& change) {
  StageOptions o;
  o.pipeline = 2;
  o.tensor = 4;
  o.partition = {40, 40};
  const LayoutPlan before = plan_layout(o, llama3_70b(), DeviceCeilings{});
  change(o);
  return {before, plan_layout(o, llama3_70b(), DeviceCeilings{})};
}

// --quantization fp8: the layer linears' weights take one byte per parameter (e4m3), embeddings and the LM
// head keep two, so each stage plans the weights it really holds and the KV room that leaves.
TEST(LayoutPlan, Fp8LinearsTakeOneBytePerLayerWeight) {
  const ModelSpec spec = llama3_70b();
  const auto [bf16, fp8] = plan_70b_pp2_tp4([](StageOptions& o) { o.quantization = "fp8"; });
  EXPECT_EQ(bf16.workload.weight_dtype_bytes, 2);
  EXPECT_EQ(fp8.workload.weight_dtype_bytes, 1);
  const double head = static_cast<double>(spec.vocab) * spec.hidden / 4 * 2;  // bf16, per tp rank
  for (size_t s = 0; s < 2; ++s) {
    const StageCost& a = bf16.partition.stages[s];
    const StageCost& b = fp8.partition.stages[s];
    EXPECT_DOUBLE_EQ(b.weight_bytes - head, (a.weight_bytes - head) / 2) << "stage " << s;
    EXPECT_GT(b.kv_tokens, a.kv_tokens) << "stage " << s;
    EXPECT_DOUBLE_EQ(b.kv_bytes_per_token, a.kv_bytes_per_token);
  }
}

// The same config with --kv-cache-dtype fp8: one byte per KV element, so every stage holds twice the KV
// tokens of bf16 (weights unchanged), and the printed plan says which KV dtype it planned.
TEST(LayoutPlan, Fp8KvCacheDoublesTheKvTokens) {
  const ModelSpec spec = llama3_70b();
  const auto [bf16, fp8] = plan_70b_pp2_tp4([](StageOptions& o) { o.kv_cache_dtype = "fp8"; });
  EXPECT_EQ(bf16.workload.kv_dtype_bytes, 2);
  EXPECT_EQ(fp8.workload.kv_dtype_bytes, 1);
  ASSERT_EQ(fp8.partition.stages.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const StageCost& a = bf16.partition.stages[s];
    const StageCost& b = fp8.partition.stages[s];
    EXPECT_GT(a.kv_tokens, 0);
    EXPECT_DOUBLE_EQ(b.kv_tokens, 2 * a.kv_tokens) << "stage " << s;
    EXPECT_DOUBLE_EQ(b.kv_bytes_per_token * 2, a.kv_bytes_per_token);
    EXPECT_DOUBLE_EQ(b.weight_bytes, a.weight_bytes);
  }
  // Llama-3-70B over tp 4: 2 KV heads of 128 per rank, K and V, one byte each.
  EXPECT_DOUBLE_EQ(kv_layer_token_bytes(spec, 4, 1), 2.0 * 2 * 128);
  EXPECT_NE(format_plan(spec, fp8.workload, fp8.partition).find("KV cache: fp8_e4m3"), std::string::npos);
  EXPECT_NE(format_plan(spec, bf16.workload, bf16.partition).find("KV cache: bf16/fp16"), std::string::npos);
}

TEST(LayoutPlan, UserPartitionWinsAndIsChecked) {
  StageOptions o;
  o.pipeline = 2;
  o.partition = {30, 50};
  EXPECT_EQ(plan_layout(o, llama3_70b(), DeviceCeilings{}).layer_counts(), (std::vector<int64_t>{30, 50}));
  o.partition = {30, 40};
  testing::expect_error([&] { plan_layout(o, llama3_70b(), DeviceCeilings{}); }, "parallel.partition sums to 70");
  o.partition.clear();
  o.pipeline = 81;
  testing::expect_error([&] { plan_layout(o, llama3_70b(), DeviceCeilings{}); }, "fewer than the 81 pipeline stages");
}

// The one layout check of plan and generate: tp must split the 64 heads and 8 KV heads of Llama-3-70B.
TEST(LayoutPlan, CheckLayoutRefusesTensorSplitsTheHeadsDoNotAllow) {
  StageOptions o;
  o.tensor = 3;
  testing::expect_error([&] { check_layout(o, llama3_70b()); }, "tensor-parallel size 3 does not divide the 64");
  testing::expect_error([&] { plan_layout(o, llama3_70b(), DeviceCeilings{}); }, "does not divide the 64");
  o.tensor = 16;
  EXPECT_NO_THROW(check_layout(o, llama3_70b()));  // 8 KV heads, each replicated twice
  o.tensor = 1;
  o.pipeline = 2;
  o.partition = {10, 10};
  testing::expect_error([&] { check_layout(o, llama3_70b()); }, "parallel.partition sums to 20");
}

TEST(LayoutPlan, CeilingsSource) {
  EXPECT_FALSE(planning_ceilings("").measured.any());
  const std::string path = testing::data_path("doctor_measured.json");
  const DeviceCeilings dev = planning_ceilings(path);
  EXPECT_TRUE(dev.measured.any());
  EXPECT_EQ(dev.measured.source, path);
  EXPECT_DOUBLE_EQ(dev.flops, DeviceCeilings{}.flops);
  EXPECT_DOUBLE_EQ(dev.bandwidth, DeviceCeilings{}.bandwidth);
  testing::expect_error([] { planning_ceilings("/nonexistent/doctor.json"); }, "/nonexistent/doctor.json");
}

// A CPU doctor JSON carries its own ceilings and dtype: the run plans its split in fp32 against them.
TEST(LayoutPlan, CpuDoctorPlansInFp32AtItsOwnCeilings) {
  const std::string path = testing::data_path("doctor_cpu.json");
  const DeviceCeilings dev = planning_ceilings(path);
  EXPECT_DOUBLE_EQ(dev.flops, 0.02e12);
  EXPECT_DOUBLE_EQ(dev.bandwidth, 12e9);
  Config cfg;
  cfg.set("parallel.pipeline", "2", "test");
  const LayoutPlan p = plan_layout(StageOptions::from_config(cfg), llama3_70b(), dev);
  EXPECT_EQ(p.workload.dtype_bytes, 4);
  EXPECT_EQ(p.workload.kv_dtype_bytes, 4);
  EXPECT_DOUBLE_EQ(p.partition.stages[1].kv_bytes_per_token, (80 - p.layer_counts()[0]) * 2.0 * 8 * 128 * 4);
}

// The plan command's path (options from the config, ceilings from the doctor JSON it names) and the
// run's (plan_layout over planning_ceilings(opt.device_profile)) agree on every layout tried, and for
// some of them the measured split is not the roofline one: a run planning with DeviceCeilings{} (as
// it did) would have run another split than `conveyor plan --doctor-json` printed.
TEST(LayoutPlan, PlanPathEqualsRunPath) {
  const ModelSpec spec = llama3_70b();
  const std::string path = testing::data_path("doctor_measured.json");
  int differs_from_roofline = 0, cases = 0;
  for (int pp : {2, 3, 4, 8})
    for (int seqs : {1, 8, 64, 256})
      for (int mb : {0, 1, 5}) {
        Config cfg;
        cfg.set("parallel.pipeline", std::to_string(pp), "test");
        cfg.set("parallel.micro_batches", std::to_string(mb), "test");
        cfg.set("scheduler.max_num_seqs", std::to_string(seqs), "test");
        cfg.set("parallel.device_profile", path, "test");
        const StageOptions run_opt = StageOptions::from_config(cfg);
        const LayoutPlan run = plan_layout(run_opt, spec, planning_ceilings(run_opt.device_profile));
        const LayoutPlan plan =
            plan_layout(StageOptions::from_config(cfg), spec, ceilings_from_doctor(read_doctor_json(path), path), 2048);
        ASSERT_EQ(run.layer_counts(), plan.layer_counts()) << "pp " << pp << " seqs " << seqs << " mb " << mb;
        ++cases;
        if (plan_layout(run_opt, spec, DeviceCeilings{}).layer_counts() != run.layer_counts()) ++differs_from_roofline;
      }
  EXPECT_EQ(cases, 48);
  EXPECT_GT(differs_from_roofline, 0);
}

// A doctor JSON names its GPU: the plan takes that GPU's ceilings and memory (an H100's doctor planned as
// an H200 put 256 sequences where the run had room for 200), its measured memory over the preset's, and
// the H200's for a GPU gpu_peaks.h does not know; a CPU doctor's memory is the host's, not a GPU's.
TEST(LayoutPlan, DoctorJsonBringsItsGpusCeilingsAndMemory) {
  std::ifstream in(testing::data_path("doctor_measured.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["device"]["name"] = "NVIDIA H100 80GB HBM3";
  DeviceCeilings h100 = ceilings_from_doctor(j, "h100.json");
  EXPECT_EQ(h100.label, "H100");
  EXPECT_DOUBLE_EQ(h100.bandwidth, kH100Peaks.bandwidth);
  EXPECT_DOUBLE_EQ(h100.memory, kH100Peaks.memory);
  EXPECT_TRUE(h100.measured.any());
  j["device"]["memory_gib"] = 79.18;
  EXPECT_DOUBLE_EQ(ceilings_from_doctor(j, "h100.json").memory, 79.18 * (1ull << 30));
  j["device"]["name"] = "NVIDIA H200";
  EXPECT_EQ(ceilings_from_doctor(j, "h200.json").label, "H200");
  j["device"]["name"] = "NVIDIA A100-SXM4-80GB";
  const DeviceCeilings other = ceilings_from_doctor(j, "a100.json");
  EXPECT_EQ(other.label, "H200");
  EXPECT_DOUBLE_EQ(other.bandwidth, kH200Peaks.bandwidth);
  EXPECT_DOUBLE_EQ(other.memory, 79.18 * (1ull << 30));
  EXPECT_EQ(find_gpu_peaks("h100"), &kH100Peaks);
  EXPECT_EQ(find_gpu_peaks("NVIDIA H200 NVL"), &kH200Peaks);
  EXPECT_EQ(find_gpu_peaks("NVIDIA A100-SXM4-80GB"), nullptr);

  std::ifstream cpu_in(testing::data_path("doctor_cpu.json"));
  const DeviceCeilings cpu = ceilings_from_doctor(nlohmann::json::parse(cpu_in), "cpu.json");
  EXPECT_EQ(cpu.label, "CPU");
  EXPECT_DOUBLE_EQ(cpu.memory, DeviceCeilings{}.memory);
}

}  // namespace
}  // namespace conveyor
