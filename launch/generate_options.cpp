// Flags of `conveyor generate` (see generate_options.h).
#include "launch/generate_options.h"

#include "runtime/config/cli.h"
#include "runtime/core/strings.h"
#include "runtime/tokenizer/chat_template.h"

namespace po = boost::program_options;

namespace conveyor {
namespace {

struct SamplingFlag {
  const char* flag;
  const char* key;
  const char* help;
};

const SamplingFlag kSamplingFlags[] = {
    {"max-tokens", "sampling.max_tokens", "most tokens to generate (default: until EOS or the context limit)"},
    {"min-tokens", "sampling.min_tokens", "tokens before EOS or a stop may end the output"},
    {"temperature", "sampling.temperature", "0 = greedy"},
    {"top-p", "sampling.top_p", "nucleus mass in (0, 1]"},
    {"top-k", "sampling.top_k", "keep the k most likely (0 or -1: off)"},
    {"min-p", "sampling.min_p", "drop tokens below min_p * p(max)"},
    {"repetition-penalty", "sampling.repetition_penalty", "> 1 discourages repeats"},
    {"presence-penalty", "sampling.presence_penalty", "in [-2, 2]"},
    {"frequency-penalty", "sampling.frequency_penalty", "in [-2, 2]"},
};

}  // namespace

po::options_description generate_options() {
  po::options_description desc("conveyor generate options");
  desc.add_options()("help,h", "show this help")("prompt", po::value<std::string>(), "prompt text")(
      "prompt-ids", po::value<std::string>(), "prompt as token ids, e.g. 1,2,3 (no tokenizer needed)")(
      "chat", "wrap the prompt in the model's chat template (or --chat-template) as one user turn, as a batch chat request")(
      "system", po::value<std::string>(), "system message for --chat")(
      "print-ids", "print the generated token ids as the last line of stdout")(
      "stop", po::value<std::vector<std::string>>()->composing(), "stop string (repeatable)")(
      "ignore-eos", "keep generating past EOS")("logprobs", po::value<int64_t>(),
                                                 "report the chosen token's logprob and the top N (stderr)")(
      "input", po::value<std::string>(), "batch job: requests JSONL (OpenAI Batch or {\"prompt\": ...} lines)")(
      "output", po::value<std::string>(), "batch job: results JSONL (appended; a rerun resumes)")(
      "errors", po::value<std::string>(), "batch job: per-line errors JSONL (default <output>.errors.jsonl)")(
      "strict", "batch job: abort before any work when a line is invalid")(
      "chat-template", po::value<std::string>(), "chatml, llama3 or llama2 (default: from the model)")(
      "served-model-name", po::value<std::vector<std::string>>()->composing(),
      "batch job: a name requests may give as 'model' (repeatable; default: the --model path and its file name)");
  for (const SamplingFlag& f : kSamplingFlags) desc.add_options()(f.flag, po::value<std::string>(), f.help);
  add_config_options(&desc);
  return desc;
}

void apply_generation_defaults(const ModelSpec& spec, Config& cfg) {
  const std::string origin = spec.source + " (generation_config)";
  auto set_default = [&](const char* key, const std::string& text) {
    if (cfg.value(key).origin == "default") cfg.set(key, text, origin);
  };
  const GenerationDefaults& g = spec.generation;
  if (g.do_sample && !*g.do_sample) set_default("sampling.temperature", "0");
  else if (g.temperature) set_default("sampling.temperature", std::to_string(*g.temperature));
  if (g.top_p) set_default("sampling.top_p", std::to_string(*g.top_p));
  if (g.top_k) set_default("sampling.top_k", std::to_string(*g.top_k));
  if (g.repetition_penalty) set_default("sampling.repetition_penalty", std::to_string(*g.repetition_penalty));
}

void apply_sampling_flags(const po::variables_map& vm, Config& cfg) {
  // --set wins over flags; its origin reads "--set key=value".
  auto set_by_set = [&](const char* key) { return starts_with(cfg.value(key).origin, "--set"); };
  for (const SamplingFlag& f : kSamplingFlags) {
    if (!vm.count(f.flag) || set_by_set(f.key)) continue;
    cfg.set(f.key, vm[f.flag].as<std::string>(), std::string("--") + f.flag);
  }
  if (vm.count("ignore-eos") && !set_by_set("sampling.ignore_eos"))
    cfg.set("sampling.ignore_eos", "true", "--ignore-eos");
}

SamplingParams prompt_sampling_params(const Config& cfg, const po::variables_map& vm) {
  SamplingParams params = SamplingParams::from_config(cfg);
  if (vm.count("stop")) params.stop = vm["stop"].as<std::vector<std::string>>();
  if (vm.count("logprobs")) params.logprobs = vm["logprobs"].as<int64_t>();
  params.validate();
  return params;
}

BatchJobOptions batch_job_options(const Config& cfg, const po::variables_map& vm, const std::string& model_path) {
  BatchJobOptions job;
  job.input = vm["input"].as<std::string>();
  job.output = vm.count("output") ? vm["output"].as<std::string>() : cfg.get_string("io.output");
  job.errors = vm.count("errors") ? vm["errors"].as<std::string>() : cfg.get_string("io.errors");
  job.strict = vm.count("strict") > 0 || cfg.get_bool("io.strict");
  job.model = model_path.empty() ? cfg.get_string("model.config") : model_path;
  job.model_has_files = !model_path.empty() && cfg.get_string("model.load_format") != "dummy";
  if (vm.count("chat-template")) job.chat_template_name = vm["chat-template"].as<std::string>();
  if (!model_path.empty()) job.model_chat_template = model_chat_template(model_path);
  job.served_model_names = served_model_names(vm, job.model);
  return job;
}

std::vector<std::string> served_model_names(const po::variables_map& vm, const std::string& model) {
  if (vm.count("served-model-name")) return vm["served-model-name"].as<std::vector<std::string>>();
  std::string trimmed = model;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const std::string file = trimmed.substr(trimmed.find_last_of('/') + 1);
  std::vector<std::string> names = {model};
  if (!file.empty() && file != model) names.push_back(file);
  return names;
}

}  // namespace conveyor
