// Offline batch job (see batch_job.h).
#include "launch/batch_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "runtime/batch/input.h"
#include "runtime/batch/output.h"
#include "runtime/batch/progress.h"
#include "runtime/batch/signals.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"
#include "runtime/tokenizer/chat_template.h"

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
std::vector<int32_t> prompt_of(const BatchRequest& r, const Generator& engine, const ChatTemplateChoice& chat) {
  if (r.endpoint == Endpoint::kCompletions) return r.prompt_is_ids() ? r.prompt_ids : engine.encode(r.prompt_text);
  CONVEYOR_CHECK(chat.chosen.has_value(), "chat request, but no chat template: ", chat.why_none);
  const Tokenizer* tok = engine.tokenizer();
  CONVEYOR_CHECK(tok != nullptr, "chat request, but the model has no tokenizer");
  std::string bos = tok->bos_id() >= 0 ? tok->id_to_token(tok->bos_id()) : "";
  std::string eos = tok->eos_ids().empty() ? "" : tok->id_to_token(tok->eos_ids().front());
  return tok->encode(chat.chosen->render(r.messages, true, bos, eos), /*add_bos=*/false, /*parse_special=*/true);
}


double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json percentiles(const std::vector<double>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p90", percentile(v, 0.9)}, {"p99", percentile(v, 0.99)},
          {"count", v.size()}};
}

// The token as text: its piece with byte-level / SentencePiece markers turned back into bytes.
std::string token_text(const Tokenizer* tok, int32_t id) { return tok ? tok->decode({id}, false) : std::to_string(id); }

nlohmann::json token_bytes(const std::string& s) {
  nlohmann::json b = nlohmann::json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

nlohmann::json openai_logprobs(const CompletionOutput& out, Endpoint endpoint, const Tokenizer* tok) {
  if (out.logprobs.empty()) return nullptr;
  if (endpoint == Endpoint::kChatCompletions) {
    nlohmann::json content = nlohmann::json::array();
    for (const TokenLogprobs& lp : out.logprobs) {
      const std::string t = token_text(tok, lp.token);
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& a : lp.top) {
        const std::string at = token_text(tok, a.token);
        top.push_back({{"token", sanitize_utf8(at)}, {"logprob", a.logprob}, {"bytes", token_bytes(at)}});
      }
      content.push_back({{"token", sanitize_utf8(t)}, {"logprob", lp.logprob}, {"bytes", token_bytes(t)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  nlohmann::json tokens = nlohmann::json::array(), values = nlohmann::json::array(), tops = nlohmann::json::array(),
                 offsets = nlohmann::json::array();
  int64_t offset = 0;
  for (const TokenLogprobs& lp : out.logprobs) {
    const std::string t = token_text(tok, lp.token);
    tokens.push_back(sanitize_utf8(t));
    values.push_back(lp.logprob);
    nlohmann::json top = nlohmann::json::object();
    for (const TokenLogprob& a : lp.top) top[sanitize_utf8(token_text(tok, a.token))] = a.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

nlohmann::json batch_summary_json(const BatchJobStats& s, const nlohmann::json& pipeline) {
  const double t = std::max(s.elapsed_s, 1e-9);
  nlohmann::json j = {{"requests", s.total},
                      {"completed", s.done - s.failed},
                      {"failed", s.failed},
                      {"invalid_lines", s.invalid_lines},
                      {"resumed", s.resumed},
                      {"interrupted", s.interrupted},
                      {"prompt_tokens", s.prompt_tokens},
                      {"output_tokens", s.output_tokens},
                      {"elapsed_s", s.elapsed_s},
                      {"requests_per_second", static_cast<double>(s.done - s.failed) / t},
                      {"output_tokens_per_second", static_cast<double>(s.output_tokens) / t},
                      {"total_tokens_per_second", static_cast<double>(s.prompt_tokens + s.output_tokens) / t},
                      {"ttft_s", percentiles(s.ttft_s)},
                      {"tpot_s", percentiles(s.tpot_s)},
                      {"preemptions", s.preemptions}};
  if (!pipeline.is_null()) j["pipeline"] = pipeline;
  return j;
}

BatchJob::BatchJob(const Config& cfg, BatchJobOptions options)
    : opt_(std::move(options)), progress_interval_(cfg.get_float("logging.progress_interval")) {
  CONVEYOR_CHECK(!opt_.output.empty(), "--input needs --output (the results JSONL)");
  BatchInputOptions in_opt;
  in_opt.defaults = SamplingParams::from_config(cfg);
  in_opt.strict = opt_.strict;
  in_opt.origin = opt_.input;
  input_ = read_batch_input(opt_.input, in_opt);

  BatchOutputOptions out_opt;
  out_opt.output_path = opt_.output;
  out_opt.errors_path = opt_.errors;
  out_opt.fsync_interval = cfg.get_float("io.fsync_interval");
  out_opt.manifest = make_manifest(opt_.input, opt_.model, sampling_defaults_json(cfg));
  writer_ = std::make_unique<BatchOutputWriter>(out_opt);
  for (const auto& e : input_.errors) writer_->write_error(e);
  stats_.invalid_lines = static_cast<int64_t>(input_.errors.size());
}

BatchJob::~BatchJob() = default;

int BatchJob::run(Generator& engine) {
  BatchOutputWriter& writer = *writer_;
  ChatTemplateChoice chat = choose_chat_template(opt_.chat_template_name, opt_.model_chat_template);
  install_stop_handlers();
  std::map<int64_t, const BatchRequest*> by_id;
  stats_.total = static_cast<int64_t>(input_.requests.size());
  for (size_t i = 0; i < input_.requests.size(); ++i) {
    const BatchRequest& r = input_.requests[i];
    if (writer.is_done(r.custom_id)) {
      ++stats_.resumed;
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
      ++stats_.failed;
      ++stats_.done;
    }
  }

  ProgressSnapshot snap;
  snap.total = stats_.total;
  snap.resumed = stats_.resumed;
  ProgressReporter progress(std::cerr, isatty(STDERR_FILENO) != 0, progress_interval_, true);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (engine.has_unfinished() && !stop_requested()) {
    for (const CompletionOutput& out : engine.step()) {
      const BatchRequest& r = *by_id.at(out.request_id);
      ++stats_.done;
      if (out.finish_reason == "error") {
        writer.write_error(r.custom_id, r.line, out.error);
        ++stats_.failed;
        continue;
      }
      BatchResult res;
      res.custom_id = r.custom_id;
      res.endpoint = r.endpoint;
      res.model = r.model.empty() ? opt_.model : r.model;
      res.text = out.text;
      res.token_ids = out.token_ids;
      res.finish_reason = out.finish_reason;
      res.prompt_tokens = out.prompt_tokens;
      res.logprobs = openai_logprobs(out, r.endpoint, engine.tokenizer());
      writer.write_result(res);
      stats_.prompt_tokens += out.prompt_tokens;
      stats_.output_tokens += out.completion_tokens;
      if (out.completion_tokens > 0) stats_.ttft_s.push_back(out.ttft_s);
      if (out.completion_tokens > 1) stats_.tpot_s.push_back(out.tpot_s);
    }
    writer.sync_if_due();
    snap.done = stats_.done;
    snap.failed = stats_.failed;
    snap.output_tokens = stats_.output_tokens;
    snap.elapsed_s = elapsed();
    progress.update(snap, snap.elapsed_s);
  }
  stats_.elapsed_s = snap.elapsed_s = elapsed();
  stats_.preemptions = engine.preemptions();
  snap.done = stats_.done;
  progress.finish(snap);
  writer.close();
  if (stop_requested()) {
    stats_.interrupted = true;
    std::cerr << interrupted_message(stop_signal(), stats_.resumed + stats_.done, stats_.total, opt_.output) << std::endl;
    return kExitInterrupted;
  }
  std::cerr << "batch: " << stats_.done - stats_.failed << " results, " << stats_.failed + stats_.invalid_lines
            << " errors (" << writer.errors_path() << "), " << stats_.resumed << " skipped as already done; "
            << stats_.output_tokens << " output tokens in " << format_duration(stats_.elapsed_s) << std::endl;
  return 0;
}

}  // namespace conveyor
