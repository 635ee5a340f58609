// `conveyor plan`: the layer partition, weights and KV capacity per rank and the predicted bubble for a
// layout, from the model's shape alone (no weights loaded, no GPU, no MPI). With --compare it ranks every
// pp x tp layout of --gpus GPUs for a workload by predicted output tokens/s (stages/partitioner.h says
// how), with link costs from `conveyor doctor --output-json` when given.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "launch/doctor_measure.h"
#include "runtime/config_cli.h"
#include "runtime/error.h"
#include "stages/partitioner.h"

namespace po = boost::program_options;

namespace conveyor {

namespace {

// The slowest measured link of each kind sets the pace: the lowest bandwidths, the highest latency.
// The doctor measures no all-reduce latency, so that one keeps its default.
LinkCosts links_from_doctor(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good(), "cannot read --doctor-json ", path, "; write it with `conveyor doctor --output-json`");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_THROW("--doctor-json ", path, " is not JSON: ", e.what());
  }
  LinkCosts links;
  try {
    double bw = 0, lat = 0, busbw = 0;
    for (const auto& e : j.value("edges", nlohmann::json::array())) {
      const double b = e.at("bandwidth_gbps").get<double>() * 1e9;
      bw = bw == 0 ? b : std::min(bw, b);
      lat = std::max(lat, e.at("latency_us").get<double>() * 1e-6);
    }
    for (const auto& g : j.value("tensor_groups", nlohmann::json::array())) {
      const double b = g.at("busbw_gbps").get<double>() * 1e9;
      busbw = busbw == 0 ? b : std::min(busbw, b);
    }
    if (bw > 0) links.p2p_bandwidth = bw;
    if (lat > 0) links.p2p_latency = lat;
    if (busbw > 0) links.allreduce_busbw = busbw;
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_THROW("--doctor-json ", path, ": ", e.what(), " (expected edges[].bandwidth_gbps, latency_us and "
                   "tensor_groups[].busbw_gbps as `conveyor doctor --output-json` writes)");
  }
  return links;
}

nlohmann::json comparison_json(const CompareWorkload& cw, int gpus, const LinkCosts& links,
                               const std::vector<LayoutPrediction>& ranked) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LayoutPrediction& p : ranked)
    rows.push_back({{"pipeline", p.pipeline}, {"tensor", p.tensor}, {"micro_batches", p.micro_batches},
                    {"partition", p.partition}, {"step_time_s", p.step_time_s}, {"prefill_time_s", p.prefill_time_s},
                    {"decode_tokens_per_s", p.decode_tokens_per_s}, {"output_tokens_per_s", p.output_tokens_per_s},
                    {"per_gpu_tokens_per_s", p.per_gpu_tokens_per_s}, {"bubble", p.bubble},
                    {"busiest_stage_s", {{"compute", p.compute_s}, {"weights", p.weights_s}, {"kv", p.kv_s},
                                         {"allreduce", p.allreduce_s}, {"p2p", p.p2p_s}}},
                    {"bottleneck", p.bottleneck}, {"fits", p.fits}, {"why_not", p.why_not}});
  return {{"workload", {{"batch", cw.batch}, {"input_len", cw.input_len}, {"output_len", cw.output_len}, {"gpus", gpus}}},
          {"links", {{"allreduce_busbw_gbps", links.allreduce_busbw / 1e9},
                     {"allreduce_latency_us", links.allreduce_latency * 1e6},
                     {"p2p_bandwidth_gbps", links.p2p_bandwidth / 1e9}, {"p2p_latency_us", links.p2p_latency * 1e6}}},
          {"layouts", rows}};
}

int run_compare(const po::variables_map& vm, const Config& cfg, const ModelSpec& spec, const DeviceCeilings& dev) {
  CompareWorkload cw;
  cw.batch = vm.count("batch") ? vm["batch"].as<int64_t>() : cfg.get_int("scheduler.max_num_seqs");
  cw.input_len = vm["input-len"].as<int64_t>();
  cw.output_len = vm["output-len"].as<int64_t>();
  cw.micro_batches = static_cast<int>(cfg.get_int("parallel.micro_batches"));
  CONVEYOR_CHECK(vm.count("gpus"), "--compare needs --gpus N (the GPUs to lay the model out on)");
  const int gpus = vm["gpus"].as<int>();
  LinkCosts links;
  if (vm.count("doctor-json")) links = links_from_doctor(vm["doctor-json"].as<std::string>());
  const std::vector<LayoutPrediction> ranked = compare_layouts(spec, cw, gpus, dev, links);
  std::cout << format_comparison(spec, cw, gpus, ranked);
  std::printf("links: all-reduce %.0f GB/s busbw + %.1f us, p2p %.0f GB/s + %.1f us%s\n", links.allreduce_busbw / 1e9,
              links.allreduce_latency * 1e6, links.p2p_bandwidth / 1e9, links.p2p_latency * 1e6,
              vm.count("doctor-json") ? " (from --doctor-json)" : " (defaults; measure with conveyor doctor)");
  if (vm.count("output-json")) {
    const std::string path = vm["output-json"].as<std::string>();
    std::ofstream out(path);
    CONVEYOR_CHECK(out.good(), "cannot write --output-json ", path);
    out << comparison_json(cw, gpus, links, ranked).dump(2) << "\n";
    CONVEYOR_CHECK(out.good(), "writing --output-json ", path, " failed");
  }
  return ranked.front().fits ? 0 : 3;
}

}  // namespace

int run_plan_command(const Args& args) {
  po::options_description desc("conveyor plan options");
  desc.add_options()("help,h", "show this help")(
      "batch", po::value<int64_t>(), "sequences decoding together (default: scheduler.max_num_seqs)")(
      "context", po::value<int64_t>()->default_value(2048), "mean tokens per sequence in the KV cache")(
      "device-memory", po::value<std::string>()->default_value("140G"), "memory per GPU")(
      "peak-tflops", po::value<double>()->default_value(810.0), "dense bf16 TFLOP/s per GPU")(
      "peak-bandwidth", po::value<double>()->default_value(4.28), "memory bandwidth per GPU, TB/s")(
      "compare", "rank every pp x tp layout of --gpus GPUs by predicted output tokens/s")(
      "gpus", po::value<int>(), "--compare: GPUs to lay the model out on")(
      "input-len", po::value<int64_t>()->default_value(1024), "--compare: prompt tokens per sequence")(
      "output-len", po::value<int64_t>()->default_value(1024), "--compare: generated tokens per sequence")(
      "doctor-json", po::value<std::string>(), "--compare: link costs from `conveyor doctor --output-json`")(
      "output-json", po::value<std::string>(), "--compare: write the ranked layouts here");
  add_config_options(&desc);
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: conveyor plan --config run.yaml | --model PATH [-pp P] [-tp T] [options]\n"
                 "       conveyor plan --compare --gpus N --set model.config=M.yaml [--batch B] [--input-len I] "
                 "[--output-len O]\n\n"
              << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);
  std::string shape = !cfg.get_string("model.config").empty() ? cfg.get_string("model.config")
                                                              : cfg.get_string("model.path");
  CONVEYOR_CHECK(!shape.empty(), "conveyor plan needs a model shape: --model PATH (HF dir, .gguf) or "
                                 "--set model.config=configs/models/<name>.yaml");
  ModelSpec spec = load_model_spec(shape);
  DeviceCeilings dev;
  dev.memory = static_cast<double>(parse_byte_size(vm["device-memory"].as<std::string>()));
  dev.flops = vm["peak-tflops"].as<double>() * 1e12;
  dev.bandwidth = vm["peak-bandwidth"].as<double>() * 1e12;
  dev.memory_utilization = cfg.get_float("cache.gpu_memory_utilization");
  if (vm.count("compare")) return run_compare(vm, cfg, spec, dev);
  for (const char* flag : {"gpus", "doctor-json", "output-json"})
    CONVEYOR_CHECK(!vm.count(flag), "--", flag, " applies to --compare only");

  Workload w;
  w.batch = vm.count("batch") ? vm["batch"].as<int64_t>() : cfg.get_int("scheduler.max_num_seqs");
  w.context = vm["context"].as<int64_t>();
  w.pipeline = static_cast<int>(cfg.get_int("parallel.pipeline"));
  w.tensor = static_cast<int>(cfg.get_int("parallel.tensor"));
  w.micro_batches = static_cast<int>(cfg.get_int("parallel.micro_batches"));
  CONVEYOR_CHECK(w.batch >= 1 && w.context >= 1, "--batch and --context must be >= 1");

  std::vector<int64_t> partition = cfg.get_int_list("parallel.partition");
  PartitionPlan plan = plan_partition(spec, w, dev, partition);
  std::cout << format_plan(spec, w, plan);
  return plan.fits ? 0 : 3;
}

}  // namespace conveyor
