// Offline batch job (see batch_job.h).
#include "launch/batch_job.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "runtime/batch_input.h"
#include "runtime/batch_output.h"
#include "runtime/chat_template.h"
#include "runtime/error.h"
#include "runtime/gguf_file.h"
#include "runtime/progress.h"
#include "runtime/signals.h"
#include "runtime/strings.h"

namespace conveyor {

std::string model_chat_template(const std::string& model_path) {
  namespace fs = std::filesystem;
  if (ends_with(model_path, ".gguf")) {
    GgufFile gguf(model_path);
    return gguf.has("tokenizer.chat_template") ? gguf.get_string("tokenizer.chat_template") : "";
  }
  fs::path cfg = fs::path(model_path) / "tokenizer_config.json";
  if (!fs::exists(cfg)) return "";
  std::ifstream in(cfg);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) return j["chat_template"];
  return "";
}

namespace {

nlohmann::json sampling_defaults_json(const Config& cfg) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& k : config_key_paths())
    if (starts_with(k, "sampling.")) j[k.substr(9)] = cfg.value(k).text();
  return j;
}

// Token ids of one request's prompt; throws an Error naming the problem (it becomes an error line).
std::vector<int32_t> prompt_of(const BatchRequest& r, const Engine& engine, const ChatTemplateChoice& chat) {
  if (r.endpoint == Endpoint::kCompletions) return r.prompt_is_ids() ? r.prompt_ids : engine.encode(r.prompt_text);
  CONVEYOR_CHECK(chat.chosen.has_value(), "chat request, but no chat template: ", chat.why_none);
  const Tokenizer* tok = engine.tokenizer();
  CONVEYOR_CHECK(tok != nullptr, "chat request, but the model has no tokenizer");
  std::string bos = tok->bos_id() >= 0 ? tok->id_to_token(tok->bos_id()) : "";
  std::string eos = tok->eos_ids().empty() ? "" : tok->id_to_token(tok->eos_ids().front());
  return tok->encode(chat.chosen->render(r.messages, true, bos, eos), /*add_bos=*/false, /*parse_special=*/true);
}

}  // namespace

int run_batch_job(const Config& cfg, Engine& engine, const BatchJobOptions& opt) {
  CONVEYOR_CHECK(!opt.output.empty(), "--input needs --output (the results JSONL)");
  BatchInputOptions in_opt;
  in_opt.defaults = SamplingParams::from_config(cfg);
  in_opt.strict = opt.strict;
  in_opt.origin = opt.input;
  BatchInput input = read_batch_input(opt.input, in_opt);

  BatchOutputOptions out_opt;
  out_opt.output_path = opt.output;
  out_opt.errors_path = opt.errors;
  out_opt.fsync_interval = cfg.get_float("io.fsync_interval");
  out_opt.manifest = make_manifest(opt.input, opt.model, sampling_defaults_json(cfg));
  BatchOutputWriter writer(out_opt);
  for (const auto& e : input.errors) writer.write_error(e);

  ChatTemplateChoice chat = choose_chat_template(opt.chat_template_name, opt.model_chat_template);
  install_stop_handlers();
  std::map<int64_t, const BatchRequest*> by_id;
  int64_t resumed = 0, failed = 0;
  for (size_t i = 0; i < input.requests.size(); ++i) {
    const BatchRequest& r = input.requests[i];
    if (writer.is_done(r.custom_id)) {
      ++resumed;
      continue;
    }
    Request req;
    req.id = static_cast<int64_t>(i);
    req.index = static_cast<uint64_t>(r.line);
    req.params = r.sampling;
    req.label = "line " + std::to_string(r.line) + " (custom_id " + r.custom_id + ")";
    try {
      req.prompt_ids = prompt_of(r, engine, chat);
      engine.add_request(std::move(req));
      by_id[static_cast<int64_t>(i)] = &r;
    } catch (const Error& e) {
      writer.write_error(r.custom_id, r.line, e.message());
      ++failed;
    }
  }

  ProgressSnapshot snap;
  snap.total = static_cast<int64_t>(input.requests.size());
  snap.resumed = resumed;
  snap.done = failed;
  snap.failed = failed;
  ProgressReporter progress(std::cerr, isatty(STDERR_FILENO) != 0, cfg.get_float("logging.progress_interval"), true);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (engine.has_unfinished() && !stop_requested()) {
    for (const CompletionOutput& out : engine.step()) {
      const BatchRequest& r = *by_id.at(out.request_id);
      ++snap.done;
      if (out.finish_reason == "error") {
        writer.write_error(r.custom_id, r.line, out.error);
        ++snap.failed;
        continue;
      }
      BatchResult res;
      res.custom_id = r.custom_id;
      res.endpoint = r.endpoint;
      res.model = r.model.empty() ? opt.model : r.model;
      res.text = out.text;
      res.token_ids = out.token_ids;
      res.finish_reason = out.finish_reason;
      res.prompt_tokens = out.prompt_tokens;
      writer.write_result(res);
      snap.output_tokens += out.completion_tokens;
    }
    writer.sync_if_due();
    snap.elapsed_s = elapsed();
    progress.update(snap, snap.elapsed_s);
  }
  snap.elapsed_s = elapsed();
  progress.finish(snap);
  writer.close();
  if (stop_requested()) {
    std::cerr << interrupted_message(stop_signal(), resumed + snap.done, snap.total, opt.output) << std::endl;
    return kExitInterrupted;
  }
  std::cerr << "batch: " << snap.done - snap.failed << " results, " << snap.failed + input.errors.size()
            << " errors (" << writer.errors_path() << "), " << resumed << " skipped as already done; "
            << snap.output_tokens << " output tokens in " << format_duration(snap.elapsed_s) << std::endl;
  return 0;
}

}  // namespace conveyor
