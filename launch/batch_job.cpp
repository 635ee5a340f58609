// Offline batch job (see batch_job.h): wires the batch input, the engine and the batch output; the
// record, logprobs and summary shapes live in runtime/batch.
#include "launch/batch_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "launch/chat_prompt.h"
#include "runtime/batch/input.h"
#include "runtime/batch/logprobs.h"
#include "runtime/batch/prompt_logprobs.h"
#include "runtime/batch/output.h"
#include "runtime/batch/progress.h"
#include "runtime/batch/request_fields.h"
#include "runtime/batch/signals.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/weight_digest.h"
#include "runtime/tokenizer/chat_template.h"

namespace conveyor {

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
  return chat_prompt_ids(chat, engine.tokenizer(), r.messages);
}

// prompt_of's length without an engine (before start-up): -1 when it needs a tokenizer there is not, or
// the prompt cannot be built (admit will report that).
int64_t prompt_len_of(const BatchRequest& r, const Tokenizer* tok, const ChatTemplateChoice& chat) {
  if (r.endpoint == Endpoint::kCompletions && r.prompt_is_ids()) return static_cast<int64_t>(r.prompt_ids.size());
  if (tok == nullptr) return -1;
  try {
    if (r.endpoint == Endpoint::kCompletions) return static_cast<int64_t>(tok->encode(r.prompt_text, true).size());
    return static_cast<int64_t>(chat_prompt_ids(chat, tok, r.messages).size());
  } catch (const Error&) {
    return -1;
  }
}

}  // namespace

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
  // Sizes now (a changed size is refused before the load); digests after it, in confirm_model_files.
  out_opt.manifest = make_manifest(opt_.input, opt_.model, sampling_defaults_json(cfg),
                                   opt_.model_has_files ? list_weight_files(opt_.model) : std::vector<WeightFileInfo>{});
  writer_ = std::make_unique<BatchOutputWriter>(out_opt);
  for (const auto& e : input_.errors) writer_->write_error(e);
  stats_.invalid_lines = static_cast<int64_t>(input_.errors.size());
  stats_.ignored_fields = input_.ignored_fields;
}

const std::string& BatchJob::served_name() const {
  return opt_.served_model_names.empty() ? opt_.model : opt_.served_model_names.front();
}

BatchJob::~BatchJob() = default;

int64_t BatchJob::expected_seq_len(const Tokenizer* tok, int64_t context) const {
  const ChatTemplateChoice chat = choose_chat_template(opt_.chat_template_name, opt_.model_chat_template);
  int64_t sum = 0, n = 0;
  for (const BatchRequest& r : input_.requests) {
    if (static_cast<size_t>(n) == kSeqLenSample) break;
    if (writer_->is_done(r.custom_id)) continue;
    const int64_t prompt = prompt_len_of(r, tok, chat);
    const int64_t max_tokens = r.sampling.max_tokens;
    sum += prompt < 0 || max_tokens <= 0 ? context : std::min(context, prompt + max_tokens);
    ++n;
  }
  return n == 0 ? 0 : (sum + n - 1) / n;
}

// Queues every request not already in the output; one whose prompt cannot be built (or that the
// engine refuses) is an error line at once.
void BatchJob::admit(Generator& engine) {
  const ChatTemplateChoice chat = choose_chat_template(opt_.chat_template_name, opt_.model_chat_template);
  stats_.total = static_cast<int64_t>(input_.requests.size());
  for (size_t i = 0; i < input_.requests.size(); ++i) {
    const BatchRequest& r = input_.requests[i];
    if (writer_->is_done(r.custom_id)) {
      ++stats_.resumed;
      continue;
    }
    Request req;
    req.id = static_cast<int64_t>(i);
    req.index = static_cast<uint64_t>(r.line);
    req.params = r.sampling;
    if (r.prompt_logprobs) req.scoring = PromptScoring{true, static_cast<int32_t>(*r.prompt_logprobs), false, 1};
    req.label = "line " + std::to_string(r.line) + " (custom_id " + r.custom_id + ")";
    try {
      if (!r.model.empty()) check_model_name(r.model, opt_.served_model_names);
      req.prompt_ids = prompt_of(r, engine, chat);
      engine.add_request(std::move(req));
      by_id_[static_cast<int64_t>(i)] = &r;
    } catch (const Error& e) {
      writer_->write_error(r.custom_id, r.line, e.message());
      ++stats_.failed;
      ++stats_.done;
    }
  }
}

// One finished request: a result line (with the stats it adds), or an error line when it failed.
void BatchJob::record(const CompletionOutput& out, const Tokenizer* tok) {
  const BatchRequest& r = *by_id_.at(out.request_id);
  ++stats_.done;
  if (out.finish_reason == FinishReason::kError) {
    writer_->write_error(r.custom_id, r.line, out.error);
    ++stats_.failed;
    return;
  }
  BatchResult res;
  res.custom_id = r.custom_id;
  res.endpoint = r.endpoint;
  res.model = r.model.empty() ? served_name() : r.model;
  res.text = out.text;
  res.token_ids = out.token_ids;
  res.finish_reason = out.finish_reason;
  res.prompt_tokens = out.prompt_tokens;
  res.logprobs = openai_logprobs(out, r.endpoint, tok);
  if (r.prompt_logprobs) res.prompt_logprobs = openai_prompt_logprobs(out, tok);
  writer_->write_result(res);
  stats_.prompt_tokens += out.prompt_tokens;
  stats_.output_tokens += out.completion_tokens;
  if (out.completion_tokens > 0) stats_.ttft_s.push_back(out.ttft_s);
  if (out.completion_tokens > 1) stats_.tpot_s.push_back(out.tpot_s);
}

int BatchJob::run(Generator& engine) {
  BatchOutputWriter& writer = *writer_;
  install_stop_handlers();
  begin_graceful_stop();
  admit(engine);

  ProgressSnapshot snap;
  snap.total = stats_.total;
  snap.resumed = stats_.resumed;
  ProgressReporter progress(std::cerr, isatty(STDERR_FILENO) != 0, progress_interval_, true);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t generated_before = engine.generated_tokens();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (engine.has_unfinished() && !stop_requested()) {
    for (const CompletionOutput& out : engine.step()) record(out, engine.tokenizer());
    writer.sync_if_due();
    snap.done = stats_.done;
    snap.failed = stats_.failed;
    snap.output_tokens = engine.generated_tokens() - generated_before;
    snap.finished_output_tokens = stats_.output_tokens;
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
    mark_stop_reported();
    return kExitInterrupted;
  }
  if (stats_.total == 0 && stats_.invalid_lines == 0) {
    std::cerr << "batch: warning: the input '" << opt_.input << "' holds no requests (0 requests); nothing to do"
              << std::endl;
    return 0;
  }
  if (!stats_.ignored_fields.empty())
    std::cerr << "batch: " << describe_ignored_fields(stats_.ignored_fields) << std::endl;
  std::cerr << "batch: " << stats_.total << " requests: " << stats_.done - stats_.failed << " results, "
            << stats_.failed + stats_.invalid_lines << " errors (" << writer.errors_path() << "), " << stats_.resumed
            << " skipped as already done; "
            << stats_.output_tokens << " output tokens in " << format_duration(stats_.elapsed_s) << std::endl;
  return 0;
}

}  // namespace conveyor
