// `conveyor perplexity --model M --file text.txt --ctx-size N [--chunks K] [--output-json F]
// [--kl-divergence-base FILE [--kl-divergence]]`: llama.cpp's perplexity protocol (runtime/eval) on
// the engine of any pp x tp layout and backend, built from the same config flags as generate (dtype,
// quantization, KV cache dtype, ...). Prints the running PPL per chunk, then the final estimate.
#include "launch/perplexity_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/loading.h"

namespace po = boost::program_options;

namespace conveyor {

std::optional<PerplexityReport> perplexity_on_session(const Config& cfg, PipelineSession& session,
                                                      const ModelSpec& spec, const std::string& text,
                                                      PerplexityOptions opt) {
  if (!session.is_leader()) {
    session.serve();
    session.finish("");
    return std::nullopt;
  }
  const std::string model_path = cfg.get_string("model.path");
  std::unique_ptr<Tokenizer> tok = load_tokenizer(model_path, cfg.get_string("model.tokenizer"), spec);
  CONVEYOR_CHECK(tok, "perplexity needs the model's tokenizer to tokenize the text, and ", model_path,
                 " has none; pass --tokenizer");
  const PerplexityText tokens = tokenize_for_perplexity(*tok, text);
  Engine engine(session.make_runner(), std::move(tok), session.engine_options(cfg));
  // One chunk more than the pipeline holds keeps every stage busy without holding many chunks.
  opt.window = engine.runner().max_in_flight() + 1;
  PerplexityReport report = evaluate_perplexity(engine, tokens, spec.vocab, opt);
  engine.shutdown();
  session.finish("");
  return report;
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot read the perplexity text ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

po::options_description perplexity_options() {
  po::options_description desc("conveyor perplexity options");
  desc.add_options()("help,h", "show this help")("file,f", po::value<std::string>(), "the text to score (UTF-8)")(
      "ctx-size,c", po::value<int>()->default_value(512), "tokens per chunk")(
      "chunks", po::value<int64_t>()->default_value(-1), "score at most this many chunks (-1: all)")(
      "output-json", po::value<std::string>(), "write the result as JSON (docs/perplexity.md lists the fields)")(
      "kl-divergence-base", po::value<std::string>(),
      "alone: save this run's log-probabilities to FILE; with --kl-divergence: compare against FILE")(
      "kl-divergence", "compare against --kl-divergence-base: mean KLD and the same-top-token share");
  add_config_options(&desc);
  return desc;
}

void write_json(const std::string& path, const Config& cfg, const PerplexityReport& rep) {
  nlohmann::json j = rep.to_json();
  j["model"] = cfg.get_string("model.path");
  j["layout"] = {{"pipeline", cfg.get_int("parallel.pipeline")}, {"tensor", cfg.get_int("parallel.tensor")}};
  j["backend"] = cfg.get_string("runtime.backend");
  j["dtype"] = cfg.get_string("model.dtype");
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  CONVEYOR_CHECK(out.good(), "cannot write ", path);
}

}  // namespace

int run_perplexity_command(const Args& args, int* argc, char*** argv) {
  const po::options_description desc = perplexity_options();
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: [mpirun -np N] conveyor perplexity --model <hf-dir|file.gguf> --file text.txt "
                 "[--ctx-size 512] [--chunks K] [--output-json F] [--kl-divergence-base FILE [--kl-divergence]]\n\n"
              << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);
  CONVEYOR_CHECK(vm.count("file"), "perplexity needs the text to score: --file text.txt");
  CONVEYOR_CHECK(!cfg.get_string("model.path").empty(), "perplexity needs a model with a tokenizer: --model <hf-dir|file.gguf>");
  CONVEYOR_CHECK(cfg.get_int("parallel.data") == 1, "perplexity runs one replica; drop --data-parallel-size (got ",
                 cfg.get_int("parallel.data"), ")");
  PerplexityOptions opt;
  opt.ctx = vm["ctx-size"].as<int>();
  opt.max_chunks = vm["chunks"].as<int64_t>();
  if (vm.count("kl-divergence-base")) opt.kld_base = vm["kl-divergence-base"].as<std::string>();
  opt.kld_compare = vm.count("kl-divergence") > 0;
  opt.model = cfg.get_string("model.path");
  opt.on_chunk = [](int64_t i, double ppl) {
    std::printf("%s[%lld]%.4f", i ? "," : "", static_cast<long long>(i + 1), ppl);
    std::fflush(stdout);
  };
  const ModelSpec spec = load_model_spec(opt.model);
  const std::string text = read_text(vm["file"].as<std::string>());

  PipelineSession session(cfg, argc, argv);
  session.start(cfg, spec);
  const std::optional<PerplexityReport> rep = perplexity_on_session(cfg, session, spec, text, opt);
  if (!rep || session.rank() != 0) return 0;
  std::printf("\n%s", rep->summary().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "perplexity: %lld chunks of %d tokens (%lld scored) in %.2f s\n",
               static_cast<long long>(rep->chunking.n_chunks), rep->chunking.ctx,
               static_cast<long long>(rep->nll.count()), rep->seconds);
  if (vm.count("output-json")) write_json(vm["output-json"].as<std::string>(), cfg, *rep);
  return 0;
}

}  // namespace conveyor
