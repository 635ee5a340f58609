// `conveyor plan`: the layer partition, weights and KV capacity per rank and the predicted bubble for a
// layout, from the model's shape alone (no weights loaded, no GPU, no MPI). With --compare it ranks every
// pp x tp layout of --gpus GPUs for a workload by predicted output tokens/s (stages/partitioner.h says
// how). `--doctor-json` (from `conveyor doctor --output-json`) feeds measured kernel speeds and link
// costs into the model; without it every kernel runs at the ideal roofline, and the output says which.
// With --cluster it simulates the run's schedule on every layout of a cluster (stages/sim/) instead.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/dist/link_probe.h"
#include "stages/layout_plan.h"
#include "stages/partitioner.h"
#include "stages/pipeline_trace.h"
#include "stages/sim/cluster_plan.h"
#include "stages/stage_options.h"

namespace po = boost::program_options;

namespace conveyor {

namespace {

// The host step overhead of the device model: --step-overhead-us, else what doctor measured, else a
// default when speeds are measured.
void set_step_overhead(const po::variables_map& vm, DeviceProfile* p) {
  const double us = vm.count("step-overhead-us")          ? vm["step-overhead-us"].as<double>()
                    : p->measured_step_overhead_s >= 0 ? p->measured_step_overhead_s * 1e6
                    : (p->any() ? kDefaultStepOverheadUs : 0.0);
  CONVEYOR_CHECK(us >= 0, "--step-overhead-us must be >= 0, got ", us);
  p->step_overhead_s = us * 1e-6;
}

void print_device_model(const DeviceCeilings& dev) {
  std::printf("GPU: %s, %.1f GiB each (x %.2f usable), ceilings %.0f TFLOP/s bf16 and %.2f TB/s\n", dev.label.c_str(),
              dev.memory / (1ull << 30), dev.memory_utilization, dev.flops / 1e12, dev.bandwidth / 1e12);
  for (const std::string& line : describe_device_model(dev.measured, dev.flops, dev.bandwidth))
    std::cout << line << "\n";
}

nlohmann::json comparison_json(const CompareWorkload& cw, int gpus, const DeviceCeilings& dev, const LinkCosts& links,
                               const std::vector<LayoutPrediction>& ranked) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LayoutPrediction& p : ranked)
    rows.push_back({{"pipeline", p.pipeline}, {"tensor", p.tensor}, {"micro_batches", p.micro_batches},
                    {"partition", p.partition}, {"step_time_s", p.step_time_s}, {"prefill_time_s", p.prefill_time_s},
                    {"decode_tokens_per_s", p.decode_tokens_per_s}, {"output_tokens_per_s", p.output_tokens_per_s},
                    {"per_gpu_tokens_per_s", p.per_gpu_tokens_per_s}, {"bubble", p.bubble},
                    {"busiest_stage_s", {{"compute", p.compute_s}, {"weights", p.weights_s}, {"kv", p.kv_s},
                                         {"allreduce", p.allreduce_s}, {"p2p", p.p2p_s},
                                         {"overhead", p.overhead_s}}},
                    {"bottleneck", p.bottleneck}, {"fits", p.fits}, {"why_not", p.why_not}});
  return {{"workload", {{"batch", cw.batch}, {"input_len", cw.input_len}, {"output_len", cw.output_len}, {"gpus", gpus}}},
          {"links", {{"allreduce_busbw_gbps", links.allreduce_busbw / 1e9},
                     {"allreduce_latency_us", links.allreduce_latency * 1e6},
                     {"p2p_bandwidth_gbps", links.p2p_bandwidth / 1e9}, {"p2p_latency_us", links.p2p_latency * 1e6}}},
          {"device_model", {{"gpu", dev.label}, {"memory_gib", dev.memory / (1ull << 30)},
                            {"measured", dev.measured.any()}, {"source", dev.measured.source},
                            {"step_overhead_us", dev.measured.step_overhead_s * 1e6},
                            {"description", describe_device_model(dev.measured, dev.flops, dev.bandwidth)}}},
          {"layouts", rows}};
}

void write_json(const po::variables_map& vm, const nlohmann::json& j) {
  if (!vm.count("output-json")) return;
  const std::string path = vm["output-json"].as<std::string>();
  std::ofstream out(path);
  CONVEYOR_CHECK(out.good(), "cannot write --output-json ", path);
  out << j.dump(2) << "\n";
  CONVEYOR_CHECK(out.good(), "writing --output-json ", path, " failed");
}

int run_compare(const po::variables_map& vm, const StageOptions& opt, const ModelSpec& spec, const DeviceCeilings& dev,
                const nlohmann::json* doctor, const std::string& doctor_path) {
  CompareWorkload cw;
  cw.batch = opt.max_num_seqs;
  cw.input_len = vm["input-len"].as<int64_t>();
  cw.output_len = vm["output-len"].as<int64_t>();
  cw.micro_batches = opt.micro_batches;
  CONVEYOR_CHECK(vm.count("gpus"), "--compare needs --gpus N (the GPUs to lay the model out on)");
  const int gpus = vm["gpus"].as<int>();
  LinkCosts links;
  if (doctor != nullptr) links = links_from_doctor(*doctor, "--doctor-json " + doctor_path);
  const std::vector<LayoutPrediction> ranked = compare_layouts(spec, cw, gpus, dev, links);
  std::cout << format_comparison(spec, cw, gpus, ranked);
  print_device_model(dev);
  std::printf("links: all-reduce %.0f GB/s busbw + %.1f us, p2p %.0f GB/s + %.1f us%s\n", links.allreduce_busbw / 1e9,
              links.allreduce_latency * 1e6, links.p2p_bandwidth / 1e9, links.p2p_latency * 1e6,
              doctor != nullptr ? " (from --doctor-json)" : " (defaults; measure with conveyor doctor)");
  write_json(vm, comparison_json(cw, gpus, dev, links, ranked));
  return ranked.front().fits ? 0 : 3;
}

// --trace with --cluster: the top layout simulated again with its spans kept, written as a run's --trace
// (one track per stage's first rank, compute and send spans per micro-batch, the usage a run's summary
// computes from them), so benchmarks/plot_trace.py and Perfetto show the predicted schedule beside a run's.
void write_simulated_trace(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w, const SimResult& top,
                           const std::string& path) {
  const SimResult r = simulate_layout(spec, cluster, w, top.layout, /*record=*/true);
  std::vector<RankTimeline> ranks(r.stages.size());
  for (size_t s = 0; s < ranks.size(); ++s) {
    ranks[s].rank = static_cast<int>(s) * r.layout.tensor;
    ranks[s].stage = static_cast<int>(s);
  }
  for (const SimSpan& x : r.spans)
    ranks[static_cast<size_t>(x.stage)].spans.push_back(
        Span{x.step, x.send ? Phase::kSend : Phase::kCompute, x.begin_s, x.end_s, x.tokens, x.cpu, x.preempted});
  const PipelineUsage usage = summarize_usage(ranks);
  std::ofstream out(path);
  CONVEYOR_CHECK(out.good(), "cannot write --trace ", path);
  out << chrome_trace(ranks, usage).dump() << "\n";
  CONVEYOR_CHECK(out.good(), "writing --trace ", path, " failed");
  std::cerr << "simulated timeline of the top layout written to " << path << "\n";
}

// The layout given on the command line or in the config (-dp/-pp/-tp, parallel.*), if any: then
// --cluster simulates that one layout instead of ranking them all.
std::vector<SimLayout> given_layout(const Config& cfg, const StageOptions& opt) {
  bool given = false;
  for (const char* key : {"parallel.data", "parallel.pipeline", "parallel.tensor", "parallel.micro_batches",
                          "parallel.partition"})
    given = given || cfg.value(key).origin != "default";
  if (!given) return {};
  SimLayout l;
  l.data = static_cast<int>(cfg.get_int("parallel.data"));
  l.pipeline = opt.pipeline;
  l.tensor = opt.tensor;
  l.micro_batches = opt.micro_batches;
  l.partition = opt.partition;
  return {l};
}

int run_cluster(const po::variables_map& vm, const Config& cfg, const StageOptions& opt, const ModelSpec& spec,
                const std::string& shape) {
  for (const char* flag : {"compare", "gpus", "doctor", "doctor-json", "batch"})
    CONVEYOR_CHECK(!vm.count(flag), "--", flag, " does not apply to --cluster (the cluster file names the GPUs and "
                   "their doctor JSON; --workload max_num_seqs=N sets the batch)");
  const ClusterSpec cluster = load_cluster_spec(vm["cluster"].as<std::string>());
  SimWorkload w;
  w.max_num_seqs = opt.max_num_seqs;
  w.max_num_batched_tokens = opt.max_num_batched_tokens;
  w.enable_chunked_prefill = cfg.get_bool("scheduler.enable_chunked_prefill");
  w.gemm_warmup = cfg.get_bool("runtime.gemm_warmup");
  w.block_size = opt.block_size;
  w.memory_utilization = opt.gpu_memory_utilization;
  w.cpu_kv_cache_gib = opt.cpu_kv_cache_space_gib;
  w.num_blocks = opt.num_blocks;
  if (vm.count("workload")) w = parse_workload(vm["workload"].as<std::string>(), w);
  const ClusterPlan plan = plan_cluster(spec, cluster, w, given_layout(cfg, opt));
  std::cout << format_cluster_plan(spec, cluster, w, plan, static_cast<size_t>(vm["top"].as<int>()), shape);
  print_device_model(cluster.ceilings());
  write_json(vm, cluster_plan_json(cluster, w, plan, shape));
  const std::string trace = cfg.get_string("logging.trace");
  if (!trace.empty() && plan.layouts.front().sim.fits) write_simulated_trace(spec, cluster, w, plan.layouts.front().sim, trace);
  return plan.layouts.front().sim.fits ? 0 : 3;
}

}  // namespace

int run_plan_command(const Args& args) {
  po::options_description desc("conveyor plan options");
  desc.add_options()("help,h", "show this help")(
      "batch", po::value<int64_t>(),
      "sequences decoding together (default: scheduler.max_num_seqs; when that is 0, what the KV room holds)")(
      "context", po::value<int64_t>()->default_value(2048), "mean tokens per sequence in the KV cache")(
      "device-memory", po::value<std::string>()->default_value("140G"),
      "memory per GPU (default: the H200's, or the doctor JSON's GPU)")(
      "peak-tflops", po::value<double>()->default_value(810.0), "dense bf16 TFLOP/s per GPU (default as above)")(
      "peak-bandwidth", po::value<double>()->default_value(4.28), "memory bandwidth per GPU, TB/s (default as above)")(
      "compare", "rank every pp x tp layout of --gpus GPUs by predicted output tokens/s")(
      "gpus", po::value<int>(), "--compare: GPUs to lay the model out on")(
      "input-len", po::value<int64_t>()->default_value(1024), "--compare: prompt tokens per sequence")(
      "output-len", po::value<int64_t>()->default_value(1024), "--compare: generated tokens per sequence")(
      "doctor-json", po::value<std::string>(),
      "measured device speeds (and, with --compare, link costs) from `conveyor doctor --output-json` "
      "(default: parallel.device_profile, the file the run plans its split with)")(
      "doctor", po::value<std::string>(), "the same as --doctor-json")(
      "step-overhead-us", po::value<double>(),
      "host time per decode step and stage (default: 100 with doctor measurements, else 0)")(
      "output-json", po::value<std::string>(), "--compare, --cluster: write the ranked layouts here")(
      "cluster", po::value<std::string>(), "simulate every dp x pp x tp layout of this cluster YAML, or only the one -dp/-pp/-tp give (docs/cluster.md)")(
      "workload", po::value<std::string>(),
      "--cluster: prompts=N,input=I,output=O[,max_num_seqs=S][,max_num_batched_tokens=T] (defaults 1000, 1024, "
      "1024 and the scheduler.* keys)")(
      "top", po::value<int>()->default_value(10), "--cluster: layouts to print");
  add_config_options(&desc);
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: conveyor plan --config run.yaml | --model PATH [-pp P] [-tp T] [options]\n"
                 "       conveyor plan --compare --gpus N --set model.config=M.yaml [--batch B] [--input-len I] "
                 "[--output-len O]\n"
                 "       conveyor plan --cluster configs/clusters/C.yaml --set model.config=M.yaml "
                 "[--workload prompts=N,input=I,output=O] [--output-json F]\n\n"
              << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);
  std::string shape = !cfg.get_string("model.config").empty() ? cfg.get_string("model.config")
                                                              : cfg.get_string("model.path");
  CONVEYOR_CHECK(!shape.empty(), "conveyor plan needs a model shape: --model PATH (HF dir, .gguf) or "
                                 "--set model.config=configs/models/<name>.yaml");
  ModelSpec spec = load_model_spec(shape);
  // The options the run would take from this config: the plan below is the split it runs.
  StageOptions opt = StageOptions::from_config(cfg);
  if (vm.count("cluster")) return run_cluster(vm, cfg, opt, spec, shape);
  CONVEYOR_CHECK(!vm.count("workload"), "--workload applies to --cluster only");
  if (vm.count("batch")) {
    opt.max_num_seqs = vm["batch"].as<int64_t>();
    CONVEYOR_CHECK(opt.max_num_seqs >= 1, "--batch must be >= 1 (leave it out for the batch from memory)");
  }
  CONVEYOR_CHECK(!(vm.count("doctor") && vm.count("doctor-json")), "give --doctor or --doctor-json, not both");
  const std::string doctor_path = vm.count("doctor")        ? vm["doctor"].as<std::string>()
                                  : vm.count("doctor-json") ? vm["doctor-json"].as<std::string>()
                                                            : opt.device_profile;
  nlohmann::json doctor;
  if (!doctor_path.empty()) doctor = read_doctor_json(doctor_path);
  const nlohmann::json* doctor_ptr = doctor_path.empty() ? nullptr : &doctor;
  // A doctor JSON brings its GPU's figures (ceilings_from_doctor); a flag given on the command line wins.
  DeviceCeilings dev = doctor_ptr ? ceilings_from_doctor(doctor, doctor_path) : DeviceCeilings{};
  auto given = [&](const char* flag) { return !doctor_ptr || !vm[flag].defaulted(); };
  if (given("device-memory")) dev.memory = static_cast<double>(parse_byte_size(vm["device-memory"].as<std::string>()));
  if (given("peak-tflops")) dev.flops = vm["peak-tflops"].as<double>() * 1e12;
  if (given("peak-bandwidth")) dev.bandwidth = vm["peak-bandwidth"].as<double>() * 1e12;
  dev.memory_utilization = opt.gpu_memory_utilization;
  set_step_overhead(vm, &dev.measured);
  if (vm.count("compare")) return run_compare(vm, opt, spec, dev, doctor_ptr, doctor_path);
  for (const char* flag : {"gpus", "output-json"})
    CONVEYOR_CHECK(!vm.count(flag), "--", flag, " applies to --compare only");

  const int64_t context = vm["context"].as<int64_t>();
  CONVEYOR_CHECK(context >= 1, "--context must be >= 1");
  const LayoutPlan plan = plan_layout(opt, spec, dev, context);
  std::cout << format_plan(spec, plan.workload, plan.partition);
  std::cout << describe_batch(plan.batch, plan.request, plan.kv_tokens) << "\n";
  print_device_model(dev);
  return plan.partition.fits ? 0 : 3;
}

}  // namespace conveyor
