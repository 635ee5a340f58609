// Boost.Program_options glue for the configuration (see runtime/config/cli.h).
#include "runtime/config/cli.h"

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace po = boost::program_options;

namespace conveyor {

const std::vector<ConfigFlag>& config_flags() {
  static const std::vector<ConfigFlag> flags = {
      {"model", "model.path"},
      {"tokenizer", "model.tokenizer"},
      {"load-format", "model.load_format"},
      {"dtype", "model.dtype"},
      {"max-model-len", "model.max_model_len"},
      {"data-parallel-size", "parallel.data"},
      {"pipeline-parallel-size", "parallel.pipeline"},
      {"tensor-parallel-size", "parallel.tensor"},
      {"partition", "parallel.partition"},
      {"micro-batches", "parallel.micro_batches"},
      {"max-num-seqs", "scheduler.max_num_seqs"},
      {"max-num-batched-tokens", "scheduler.max_num_batched_tokens"},
      {"block-size", "cache.block_size"},
      {"gpu-memory-utilization", "cache.gpu_memory_utilization"},
      {"kv-cache-dtype", "cache.kv_cache_dtype"},
      {"quantization", "model.quantization"},
      {"num-gpu-blocks-override", "cache.num_blocks"},
      {"seed", "runtime.seed"},
      {"backend", "runtime.backend"},
      {"watchdog-timeout", "runtime.watchdog_timeout"},
      {"trace", "logging.trace"},
      {"summary", "io.summary"},
      {"log-level", "logging.level"},
  };
  return flags;
}

void add_config_options(po::options_description* desc) {
  desc->add_options()("config", po::value<std::string>(), "YAML config file (see configs/)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override any key: --set parallel.pipeline=4")(
      "enforce-eager", "run every step eagerly, no CUDA graphs (vLLM's flag) [runtime.cuda_graphs = false]")(
      "calculate-kv-scales",
      "FP8 KV cache: k/v scales from the first step's K and V (vLLM's flag) [cache.calculate_kv_scales = true]");
  for (const auto& f : config_flags()) {
    const KeySpec* spec = find_key_spec(f.key);
    CONVEYOR_CHECK(spec != nullptr, "flag --", f.flag, " maps to unknown key ", f.key);
    std::string help = spec->help + " [" + f.key + "]";
    desc->add_options()(f.flag.c_str(), po::value<std::string>(), help.c_str());
  }
}

Config config_from_options(const po::variables_map& vm) {
  Config cfg;
  if (vm.count("config")) cfg.merge_yaml_file(vm["config"].as<std::string>());
  for (const auto& f : config_flags())
    if (vm.count(f.flag)) cfg.set(f.key, vm[f.flag].as<std::string>(), "--" + f.flag);
  if (vm.count("enforce-eager")) cfg.set("runtime.cuda_graphs", "false", "--enforce-eager");
  if (vm.count("calculate-kv-scales")) cfg.set("cache.calculate_kv_scales", "true", "--calculate-kv-scales");
  if (vm.count("set")) {
    for (const auto& kv : vm["set"].as<std::vector<std::string>>()) {
      auto eq = kv.find('=');
      if (eq == std::string::npos)
        CONVEYOR_THROW("--set expects key=value (e.g. --set parallel.pipeline=4); got '", kv, "'");
      cfg.set(trim(kv.substr(0, eq)), kv.substr(eq + 1), "--set " + kv);
    }
  }
  cfg.validate();
  return cfg;
}

std::vector<std::string> normalize_args(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (a == "-tp") out.push_back("--tensor-parallel-size");
    else if (a == "-pp") out.push_back("--pipeline-parallel-size");
    else if (a == "-dp") out.push_back("--data-parallel-size");
    else if (starts_with(a, "-tp=")) out.push_back("--tensor-parallel-size=" + a.substr(4));
    else if (starts_with(a, "-pp=")) out.push_back("--pipeline-parallel-size=" + a.substr(4));
    else if (starts_with(a, "-dp=")) out.push_back("--data-parallel-size=" + a.substr(4));
    else out.push_back(a);
  }
  return out;
}

po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& desc,
                                     const po::positional_options_description* positional) {
  po::variables_map vm;
  try {
    po::command_line_parser parser(normalize_args(args));
    parser.options(desc).style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    std::vector<std::string> names;
    for (const auto& opt : desc.options()) names.push_back("--" + opt->long_name());
    CONVEYOR_THROW("unknown option '", e.get_option_name(), "'", did_you_mean(e.get_option_name(), names),
                   "; run with --help for the list");
  } catch (const po::error& e) {
    CONVEYOR_THROW("command line: ", e.what());
  }
  return vm;
}

}  // namespace conveyor
