// `conveyor generate`: one prompt (text, chat or token ids), or a batch file (--input), through the
// engine on the leader of a pipeline of any pp x tp layout (one rank without mpirun), streaming the
// text to stdout as it is produced; --print-ids prints the generated ids as the last stdout line.
// The flags and how they land on the config are in generate_options.h. Stats go to stderr.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "launch/batch_job.h"
#include "launch/chat_prompt.h"
#include "launch/command.h"
#include "launch/generate_options.h"
#include "launch/pipeline_session.h"
#include "runtime/batch/signals.h"
#include "runtime/batch/summary.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_runner.h"
#include "runtime/engine/replica_router.h"
#include "runtime/engine/request.h"
#include "runtime/model/spec.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/loading.h"
#include "stages/layout_plan.h"
#include "stages/stage_options.h"

namespace po = boost::program_options;

namespace conveyor {
namespace {

// --chat: the prompt as one user turn (after --system), built exactly as a batch job's chat request.
std::vector<int32_t> chat_ids(const Engine& engine, const po::variables_map& vm, const std::string& model_path) {
  const std::string name = vm.count("chat-template") ? vm["chat-template"].as<std::string>() : "";
  std::optional<std::string> system;
  if (vm.count("system")) system = vm["system"].as<std::string>();
  return single_turn_chat_ids(name, model_path.empty() ? "" : model_chat_template(model_path), engine.tokenizer(),
                              system, vm["prompt"].as<std::string>());
}

std::vector<int32_t> prompt_ids(const Engine& engine, const po::variables_map& vm, const std::string& model_path) {
  if (vm.count("prompt") == vm.count("prompt-ids")) CONVEYOR_THROW("give exactly one of --prompt and --prompt-ids");
  if (vm.count("prompt-ids")) {
    if (vm.count("chat")) CONVEYOR_THROW("--chat applies to a text --prompt, not --prompt-ids");
    return parse_token_ids(vm["prompt-ids"].as<std::string>(), "--prompt-ids");
  }
  if (vm.count("chat")) return chat_ids(engine, vm, model_path);
  return engine.encode(vm["prompt"].as<std::string>());
}

void print_logprobs(const Engine& engine, const CompletionOutput& out) {
  const Tokenizer* tok = engine.tokenizer();
  auto name = [&](int32_t id) { return tok ? tok->id_to_token(id) : std::to_string(id); };
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    const TokenLogprobs& lp = out.logprobs[i];
    std::fprintf(stderr, "logprobs %zu: %d %s %.5f (rank %lld) |", i, lp.token, name(lp.token).c_str(), lp.logprob,
                 static_cast<long long>(lp.rank));
    for (const TokenLogprob& t : lp.top) std::fprintf(stderr, " %d %s %.5f;", t.token, name(t.token).c_str(), t.logprob);
    std::fprintf(stderr, "\n");
  }
}

// The batch job of --input: opened (input validated, output manifest checked) before any model work.
std::unique_ptr<BatchJob> open_batch_job(const Config& cfg, const po::variables_map& vm, const std::string& model_path) {
  return std::make_unique<BatchJob>(cfg, batch_job_options(cfg, vm, model_path));
}

void write_summary(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  CONVEYOR_CHECK(out.good(), "cannot write the summary to ", path);
}

// The one prompt of --prompt / --prompt-ids, streamed to stdout.
int run_prompt(const po::variables_map& vm, Engine& engine, const SamplingParams& params, const std::string& model_path) {
  Request req;
  req.prompt_ids = prompt_ids(engine, vm, model_path);
  req.params = params;
  req.label = "the prompt";
  bool ends_with_newline = true;
  engine.set_stream_callback([&](int64_t, const std::string& delta) {
    std::fwrite(delta.data(), 1, delta.size(), stdout);
    std::fflush(stdout);
    ends_with_newline = delta.back() == '\n';
  });
  const auto t0 = std::chrono::steady_clock::now();
  const CompletionOutput out = engine.generate({req}).at(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CONVEYOR_CHECK(out.finish_reason != FinishReason::kError, out.error);
  if (!ends_with_newline) std::fputc('\n', stdout);
  if (vm.count("print-ids")) {
    std::vector<std::string> ids;
    for (int32_t id : out.token_ids) ids.push_back(std::to_string(id));
    std::printf("%s\n", join(ids, ",").c_str());
  }
  std::fflush(stdout);
  print_logprobs(engine, out);
  std::fprintf(stderr, "generate: %lld prompt + %lld generated tokens in %.2f s (%.1f tok/s), finish_reason %s, "
               "%lld preemptions\n", static_cast<long long>(out.prompt_tokens),
               static_cast<long long>(out.completion_tokens), secs, out.completion_tokens / std::max(secs, 1e-9),
               finish_reason_name(out.finish_reason), static_cast<long long>(engine.scheduler_stats().preemptions));
  return 0;
}

}  // namespace

int run_generate_command(const Args& args, int* argc, char*** argv) {
  const po::options_description desc = generate_options();
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: conveyor generate --model <hf-dir|file.gguf> (--prompt TEXT | --prompt-ids 1,2,3) "
                 "[sampling flags] [--print-ids]\n\n"
              << desc;
    return 0;
  }
  if (vm.count("input") && (vm.count("prompt") || vm.count("prompt-ids") || vm.count("chat"))) {
    CONVEYOR_THROW("--input runs a batch file and --prompt/--prompt-ids/--chat run one prompt; give one of them, "
                   "not both");
  }
  Config cfg = config_from_options(vm);
  const bool dummy = cfg.get_string("model.load_format") == "dummy";
  const std::string model_path = cfg.get_string("model.path");
  CONVEYOR_CHECK(!model_path.empty() || (dummy && !cfg.get_string("model.config").empty()),
                 "no model given; pass --model <hf-dir|file.gguf> (or --load-format dummy with --set model.config=...)");
  const ModelSpec spec = load_model_spec(model_path.empty() ? cfg.get_string("model.config") : model_path);
  check_layout(StageOptions::from_config(cfg), spec);  // as `conveyor plan` checks it, before any rank work
  apply_generation_defaults(spec, cfg);
  apply_sampling_flags(vm, cfg);

  const SamplingParams params = prompt_sampling_params(cfg, vm);

  PipelineSession session(cfg, argc, argv);
  std::unique_ptr<BatchJob> batch;
  if (session.rank() == 0 && vm.count("input")) batch = open_batch_job(cfg, vm, model_path);
  // A batch file says how long its sequences get (prompts + max_tokens): the batch from memory is chosen
  // for that, on every rank, instead of the fallback length. Rank 0 loads the tokenizer for it now.
  std::unique_ptr<Tokenizer> tok;
  int64_t seq_len = 0;
  if (batch) {
    if (!model_path.empty()) tok = load_tokenizer(model_path, cfg.get_string("model.tokenizer"), spec);
    seq_len = batch->expected_seq_len(tok.get(), spec.context_len(cfg.get_int("model.max_model_len")));
  }
  if (vm.count("input")) CONVEYOR_MPI_CHECK(MPI_Bcast(&seq_len, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  session.start(cfg, spec, seq_len);
  if (batch) batch->confirm_model_files(session.weight_files());
  const std::string trace = cfg.get_string("logging.trace");
  const std::string summary = cfg.get_string("io.summary");
  if (!session.is_leader()) {
    begin_graceful_stop();  // a Slurm signal reaches every task; the leader decides when to stop
    session.serve();
    session.finish(trace);
    return 0;
  }
  if (!tok && !model_path.empty()) tok = load_tokenizer(model_path, cfg.get_string("model.tokenizer"), spec);
  Engine engine(session.make_runner(), std::move(tok), session.engine_options(cfg));
  int status = 0;
  if (session.rank() != 0) {
    serve_replica(engine, session.leaders());  // the leader of another data-parallel replica
  } else {
    std::unique_ptr<ReplicaRouter> router;
    if (session.replicas() > 1) router = std::make_unique<ReplicaRouter>(engine, session.leaders());
    Generator& gen = router ? static_cast<Generator&>(*router) : engine;
    status = batch ? batch->run(gen) : run_prompt(vm, engine, params, model_path);
    gen.shutdown();
  }
  // The other ranks stop serving, then every rank joins the timeline gather.
  engine.shutdown();
  const std::optional<PipelineUsage> usage = session.finish(trace);
  if (usage && (session.world().world_size() > 1 || !trace.empty())) std::cerr << format_usage(*usage);
  if (!trace.empty()) std::cerr << "trace written to " << trace << "\n";
  if (!summary.empty() && session.rank() == 0) {
    CONVEYOR_CHECK(batch, "--summary applies to a batch job (--input)");
    write_summary(summary, batch_summary_json(batch->stats(), usage ? usage->to_json() : nlohmann::json()));
  }
  return status;
}

}  // namespace conveyor
