// `conveyor plan`: the layer partition, weights and KV capacity per rank and the predicted bubble for a
// layout, from the model's shape alone (no weights loaded, no GPU, no MPI).
#include <iostream>

#include "launch/command.h"
#include "launch/doctor_measure.h"
#include "runtime/config_cli.h"
#include "runtime/error.h"
#include "stages/partitioner.h"

namespace po = boost::program_options;

namespace conveyor {

int run_plan_command(const Args& args) {
  po::options_description desc("conveyor plan options");
  desc.add_options()("help,h", "show this help")(
      "batch", po::value<int64_t>(), "sequences decoding together (default: scheduler.max_num_seqs)")(
      "context", po::value<int64_t>()->default_value(2048), "mean tokens per sequence in the KV cache")(
      "device-memory", po::value<std::string>()->default_value("140G"), "memory per GPU")(
      "peak-tflops", po::value<double>()->default_value(810.0), "dense bf16 TFLOP/s per GPU")(
      "peak-bandwidth", po::value<double>()->default_value(4.28), "memory bandwidth per GPU, TB/s");
  add_config_options(&desc);
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: conveyor plan --config run.yaml | --model PATH [-pp P] [-tp T] [options]\n\n" << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);
  std::string shape = !cfg.get_string("model.config").empty() ? cfg.get_string("model.config")
                                                              : cfg.get_string("model.path");
  CONVEYOR_CHECK(!shape.empty(), "conveyor plan needs a model shape: --model PATH (HF dir, .gguf) or "
                                 "--set model.config=configs/models/<name>.yaml");
  ModelSpec spec = load_model_spec(shape);

  Workload w;
  w.batch = vm.count("batch") ? vm["batch"].as<int64_t>() : cfg.get_int("scheduler.max_num_seqs");
  w.context = vm["context"].as<int64_t>();
  w.pipeline = static_cast<int>(cfg.get_int("parallel.pipeline"));
  w.tensor = static_cast<int>(cfg.get_int("parallel.tensor"));
  w.micro_batches = static_cast<int>(cfg.get_int("parallel.micro_batches"));
  CONVEYOR_CHECK(w.batch >= 1 && w.context >= 1, "--batch and --context must be >= 1");
  DeviceCeilings dev;
  dev.memory = static_cast<double>(parse_byte_size(vm["device-memory"].as<std::string>()));
  dev.flops = vm["peak-tflops"].as<double>() * 1e12;
  dev.bandwidth = vm["peak-bandwidth"].as<double>() * 1e12;
  dev.memory_utilization = cfg.get_float("cache.gpu_memory_utilization");

  std::vector<int64_t> partition = cfg.get_int_list("parallel.partition");
  PartitionPlan plan = plan_partition(spec, w, dev, partition);
  std::cout << format_plan(spec, w, plan);
  return plan.fits ? 0 : 3;
}

}  // namespace conveyor
