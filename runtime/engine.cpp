// Engine: per step, schedule -> forward -> sample each sequence that asked for logits -> hand the
// tokens to the scheduler -> detokenize, stop-check, stream, and retire finished requests. Failed
// sequences (never fit) come back as outputs with finish_reason "error", never as an exception that
// would end a whole batch.
#include "runtime/engine.h"

#include <algorithm>

#include "runtime/config.h"
#include "runtime/error.h"

namespace conveyor {

struct Engine::RequestState {
  RequestState(const Request& r, std::vector<int32_t> eos_ids, int64_t max_model_len, const Tokenizer* tok)
      : id(r.id),
        params(r.params),
        prompt_len(static_cast<int64_t>(r.prompt_ids.size())),
        checker(r.params, std::move(eos_ids), prompt_len, max_model_len) {
    if (tok) decoder.emplace(*tok, r.params.skip_special_tokens);
  }
  int64_t id;
  SamplingParams params;
  int64_t prompt_len;
  uint64_t seed = 0;
  StopChecker checker;
  std::optional<StreamDecoder> decoder;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
};

EngineOptions EngineOptions::from_config(const Config& config) {
  EngineOptions o;
  o.scheduler = SchedulerConfig::from_config(config);
  o.max_model_len = config.get_int("model.max_model_len");
  o.seed = static_cast<uint64_t>(config.get_int("runtime.seed"));
  return o;
}

namespace {

std::vector<int32_t> model_eos_ids(const ModelSpec& spec, const Tokenizer* tok) {
  if (tok && !tok->eos_ids().empty()) return tok->eos_ids();
  std::vector<int32_t> ids;
  for (int64_t id : spec.eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

int64_t resolve_max_model_len(const ModelSpec& spec, int64_t requested) {
  if (requested <= 0) return spec.max_position_embeddings;
  spec.check_context(requested);
  return requested;
}

}  // namespace

Engine::Engine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer, EngineOptions options)
    : runner_(std::move(runner)),
      tokenizer_(std::move(tokenizer)),
      max_model_len_(resolve_max_model_len(runner_->spec(), options.max_model_len)),
      seed_(options.seed),
      scheduler_(options.scheduler, runner_->num_kv_blocks(), runner_->block_size()),
      sampler_(model_eos_ids(runner_->spec(), tokenizer_.get())) {}

Engine::~Engine() = default;

std::vector<int32_t> Engine::encode(const std::string& text) const {
  CONVEYOR_CHECK(tokenizer_, "a text prompt needs a tokenizer, but the model has none (", runner_->spec().source,
                 "); give token ids (--prompt-ids) or a tokenizer (--tokenizer)");
  return tokenizer_->encode(text, /*add_bos=*/true);
}

void Engine::add_request(Request request) {
  request.params.validate();
  validate_request(request, runner_->spec().vocab, max_model_len_);
  CONVEYOR_CHECK(!states_.count(request.id), "request id ", request.id, " is already running; ids must be unique");
  CONVEYOR_CHECK(tokenizer_ || request.params.stop.empty(), "request ", request.id,
                 ": stop strings need a tokenizer to match text, and the model has none; use stop_token_ids");
  auto st = std::make_unique<RequestState>(request, sampler_.eos_ids(), max_model_len_, tokenizer_.get());
  st->seed = request_seed(request.params, seed_, request.index);
  scheduler_.add(request.id, std::move(request.prompt_ids), max_sequence_len(request, max_model_len_));
  states_.emplace(request.id, std::move(st));
}

std::vector<CompletionOutput> Engine::step() {
  std::vector<CompletionOutput> finished;
  for (const FailedSequence& f : scheduler_.take_failed()) {
    auto it = states_.find(f.id);
    CompletionOutput out = finish_output(*it->second);
    out.finish_reason = "error";
    out.error = f.error;
    states_.erase(it);
    finished.push_back(std::move(out));
  }
  if (!scheduler_.has_unfinished()) return finished;
  const StepPlan plan = scheduler_.schedule();
  // One runner, one plan at a time: an empty plan with nothing in flight would loop forever.
  CONVEYOR_CHECK(!plan.seqs.empty(), "internal: the scheduler has ", scheduler_.num_waiting(), " waiting and ",
                 scheduler_.num_running(), " running sequences but planned nothing (", scheduler_.allocator().free_count(),
                 " of ", scheduler_.allocator().num_blocks(), " KV blocks free)");
  runner_->forward(plan, &logits_);
  const int64_t vocab = runner_->spec().vocab;
  CONVEYOR_CHECK(logits_.size() == plan.num_logits() * static_cast<size_t>(vocab), "runner returned ",
                 logits_.size(), " logits for ", plan.num_logits(), " rows of vocab ", vocab);
  std::vector<int32_t> sampled;
  std::vector<SampleResult> results;
  size_t row = 0;
  for (const SeqChunk& c : plan.seqs) {
    if (!c.wants_logits) continue;
    const Sequence& s = scheduler_.sequence(c.seq_id);
    RequestState& st = *states_.at(c.seq_id);
    SequenceView view{s.prompt_ids, s.output_ids, st.seed};
    results.push_back(sampler_.sample(logits_.data() + row * vocab, vocab, view, st.params));
    sampled.push_back(results.back().token);
    ++row;
  }
  scheduler_.on_step_done(plan, sampled);
  size_t k = 0;
  for (const SeqChunk& c : plan.seqs) {
    if (!c.wants_logits) continue;
    on_token(*states_.at(c.seq_id), results[k++], finished);
  }
  // Retire after the loop: on_token only marks finished requests so plan order stays stable.
  for (const CompletionOutput& out : finished) {
    if (out.finish_reason == "error") continue;
    scheduler_.finish(out.request_id);
    states_.erase(out.request_id);
  }
  return finished;
}

void Engine::on_token(RequestState& st, const SampleResult& r, std::vector<CompletionOutput>& finished) {
  std::string text = st.decoder ? st.decoder->step(r.token) : std::string();
  st.tokens.push_back(r.token);
  if (r.has_logprobs) st.logprobs.push_back({r.token, r.logprob, r.rank, r.top});
  st.checker.append(r.token, text);
  if (stream_) {
    std::string delta = st.checker.take_streamable();
    if (!delta.empty()) stream_(st.id, delta);
  }
  if (!st.checker.finished()) return;
  finished.push_back(finish_output(st));
}

CompletionOutput Engine::finish_output(const RequestState& st) {
  CompletionOutput out;
  out.request_id = st.id;
  out.text = st.checker.text();
  out.token_ids = st.tokens;
  out.finish_reason = st.checker.finished() ? finish_reason_name(st.checker.reason()) : "error";
  out.stop_string = st.checker.stop_string();
  out.stop_token = st.checker.stop_token();
  out.prompt_tokens = st.prompt_len;
  out.completion_tokens = static_cast<int64_t>(st.tokens.size());
  out.logprobs = st.logprobs;
  return out;
}

std::vector<CompletionOutput> Engine::generate(std::vector<Request> requests) {
  std::vector<int64_t> order;
  for (Request& r : requests) {
    order.push_back(r.id);
    add_request(std::move(r));
  }
  std::map<int64_t, CompletionOutput> done;
  while (has_unfinished())
    for (CompletionOutput& out : step()) done.emplace(out.request_id, std::move(out));
  std::vector<CompletionOutput> outputs;
  for (int64_t id : order) outputs.push_back(std::move(done.at(id)));
  return outputs;
}

}  // namespace conveyor
