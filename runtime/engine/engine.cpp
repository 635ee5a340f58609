// Engine: per step, schedule plans until the runner holds max_in_flight of them (each carries what the
// sampling stage must learn: new sequences, retired ones, the EOS ids once), then take the oldest plan's
// sampled tokens -> scheduler -> detokenize, stop-check, stream, retire finished requests. Failed
// sequences (never fit) come back as outputs with FinishReason::kError, never as an exception that
// would end a whole batch.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "runtime/engine/batch_budget.h"

namespace conveyor {

struct Engine::RequestState {
  RequestState(const Request& r, std::vector<int32_t> eos_ids, int64_t max_model_len, const Tokenizer* tok)
      : id(r.id),
        params(r.params),
        prompt_len(static_cast<int64_t>(r.prompt_ids.size())),
        checker(r.params, std::move(eos_ids), prompt_len, max_model_len),
        scoring(r.scoring),
        next_score_pos(r.scoring.first - 1) {
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
  PromptScoring scoring;
  int32_t next_score_pos;               // prompt positions below it are scored (or in flight)
  std::vector<TokenLogprobs> prompt_logprobs;
  std::vector<float> prompt_full;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point first_token, last_token;
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

// A runner without a memory plan of its own (the local CPU runner, tests) resolves auto scheduler keys
// from its KV blocks with the CPU rule; a pipeline run passes the budget its stages chose and agreed.
SchedulerConfig resolved(SchedulerConfig c, const ModelRunner& runner, int64_t max_model_len) {
  if (c.max_num_seqs > 0 && c.max_num_batched_tokens > 0) return c;
  BudgetRequest r;
  r.user = {c.max_num_seqs, c.max_num_batched_tokens};
  r.seq_len = expected_seq_len(0, runner.spec().context_len(max_model_len));
  r.block_size = runner.block_size();
  r.rule = cpu_batch_rule();
  const int64_t kv_tokens = static_cast<int64_t>(runner.num_kv_blocks()) * runner.block_size();
  const BatchBudget b = choose_batch(r, kv_tokens).budget;
  c.max_num_seqs = b.max_num_seqs;
  c.max_num_batched_tokens = b.max_num_batched_tokens;
  return c;
}

}  // namespace

Engine::Engine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer, EngineOptions options)
    : runner_(std::move(runner)),
      tokenizer_(std::move(tokenizer)),
      max_model_len_(runner_->spec().context_len(options.max_model_len)),
      seed_(options.seed),
      scheduler_(resolved(options.scheduler, *runner_, options.max_model_len).per_micro_batch(runner_->max_in_flight()),
                 runner_->num_kv_blocks(), runner_->block_size()),
      eos_ids_(model_eos_ids(runner_->spec(), tokenizer_.get())) {}

Engine::~Engine() {
  try {
    shutdown();
  } catch (...) {  // a destructor must not throw; the failing rank has already reported
  }
}

void Engine::shutdown() {
  while (!in_flight_.empty()) {
    in_flight_.pop_front();
    runner_->wait();
  }
  runner_->shutdown();
}

std::vector<int32_t> Engine::encode(const std::string& text) const {
  CONVEYOR_CHECK(tokenizer_, "a text prompt needs a tokenizer, but the model has none (", runner_->spec().source,
                 "); give token ids (--prompt-ids) or a tokenizer (--tokenizer)");
  return tokenizer_->encode(text, /*add_bos=*/true);
}

void Engine::add_request(Request request) {
  request.params.validate();
  validate_request(request, runner_->spec().vocab, max_model_len_);
  validate_prompt_scoring(request.scoring, request.label.empty() ? "request " + std::to_string(request.id) : request.label);
  CONVEYOR_CHECK(!states_.count(request.id), "request id ", request.id, " is already running; ids must be unique");
  CONVEYOR_CHECK(tokenizer_ || request.params.stop.empty(), "request ", request.id,
                 ": stop strings need a tokenizer to match text, and the model has none; use stop_token_ids");
  // Without max_tokens the context limit ends the output; where the whole KV cache holds fewer tokens
  // than max_model_len, the cache is that limit (vLLM refuses to start instead; a small CPU cache still runs).
  const int64_t kv_tokens = static_cast<int64_t>(runner_->num_kv_blocks()) * runner_->block_size();
  const int64_t context = max_model_len_ > 0 ? std::min(max_model_len_, kv_tokens) : kv_tokens;
  const int64_t limit = request.params.max_tokens > 0 ? max_model_len_ : context;
  auto st = std::make_unique<RequestState>(request, eos_ids_, limit, tokenizer_.get());
  st->seed = request_seed(request.params, seed_, request.index);
  scheduler_.add(request.id, std::move(request.prompt_ids), max_sequence_len(request, limit));
  states_.emplace(request.id, std::move(st));
}

void Engine::fail_refused(std::vector<CompletionOutput>& finished) {
  for (const FailedSequence& f : scheduler_.take_failed()) {
    auto it = states_.find(f.id);
    CompletionOutput out = finish_output(*it->second);
    out.finish_reason = FinishReason::kError;
    out.error = f.error;
    states_.erase(it);
    finished.push_back(std::move(out));
  }
}

bool Engine::submit_next() {
  const double t0 = stamps_ ? stamps_->now() : 0;
  StepPlan plan = scheduler_.schedule();
  if (plan.seqs.empty()) return false;
  for (SeqChunk& c : plan.seqs) {
    RequestState& scored = *states_.at(c.seq_id);
    assign_chunk_scoring(scored.scoring, scheduler_.sequence(c.seq_id).prompt_ids, &scored.next_score_pos, &c);
  }
  for (const SeqChunk& c : plan.seqs) {
    if (!announced_.insert(c.seq_id).second) continue;
    const RequestState& st = *states_.at(c.seq_id);
    NewSequence n{c.seq_id, st.seed, st.params, {}};
    if (st.params.repetition_penalty != 1.0) n.prompt_ids = scheduler_.sequence(c.seq_id).prompt_ids;
    plan.new_seqs.push_back(std::move(n));
  }
  plan.retired.swap(to_retire_);
  if (!eos_sent_) plan.eos_ids = eos_ids_;
  eos_sent_ = true;
  if (stamps_) {
    stamps_->add(plan.step, "schedule", t0, stamps_->now());
    stamps_->shape(plan.step, StepShape{static_cast<int64_t>(plan.seqs.size()), static_cast<int64_t>(plan.num_tokens()),
                                        plan.num_tokens() == plan.seqs.size()});
  }
  runner_->submit(plan);
  in_flight_.push_back(std::move(plan));
  return true;
}

std::vector<CompletionOutput> Engine::step() {
  std::vector<CompletionOutput> finished;
  fail_refused(finished);
  if (!scheduler_.has_unfinished()) return finished;
  while (static_cast<int>(in_flight_.size()) < runner_->max_in_flight() && submit_next()) {
  }
  // An empty plan with nothing in flight would loop forever.
  CONVEYOR_CHECK(!in_flight_.empty(), "internal: the scheduler has ", scheduler_.num_waiting(), " waiting and ",
                 scheduler_.num_running(), " running sequences but planned nothing (", scheduler_.allocator().free_count(),
                 " of ", scheduler_.allocator().num_blocks(), " KV blocks free)");
  const StepPlan plan = std::move(in_flight_.front());
  in_flight_.pop_front();
  std::optional<StepStamps::Span> waiting(std::in_place, stamps_, plan.step, "wait");
  const StepResult result = runner_->wait();
  waiting.reset();
  const StepStamps::Span post(stamps_, plan.step, "post");
  CONVEYOR_CHECK(result.step == plan.step && result.samples.size() == plan.num_logits(), "runner returned ",
                 result.samples.size(), " tokens for step ", result.step, " but step ", plan.step, " has ",
                 plan.num_logits(), " sequences to sample");
  std::vector<int32_t> sampled;
  for (const SampleResult& r : result.samples) sampled.push_back(r.token);
  scheduler_.on_step_done(plan, sampled);
  on_scores(result);  // before the tokens: a request that finishes now carries its prompt scores
  size_t k = 0;
  for (const SeqChunk& c : plan.seqs) {
    if (!c.wants_logits) continue;
    on_token(*states_.at(c.seq_id), result.samples[k++], finished);
  }
  retire(finished);
  return finished;
}

// After the loop: on_token only marks finished requests so plan order stays stable.
void Engine::retire(const std::vector<CompletionOutput>& finished) {
  for (const CompletionOutput& out : finished) {
    if (out.finish_reason == FinishReason::kError) continue;
    scheduler_.finish(out.request_id);
    states_.erase(out.request_id);
    if (announced_.erase(out.request_id)) to_retire_.push_back(out.request_id);
  }
}

void Engine::on_scores(const StepResult& result) {
  for (const PromptScores& s : result.scores) {
    RequestState& st = *states_.at(s.seq_id);
    CONVEYOR_CHECK(s.first_pos == st.scoring.first - 1 + static_cast<int32_t>(st.prompt_logprobs.size()), "step ",
                   result.step, ": prompt scores of request ", s.seq_id, " start at position ", s.first_pos,
                   " but ", st.prompt_logprobs.size(), " positions from ", st.scoring.first - 1, " have come");
    st.prompt_logprobs.insert(st.prompt_logprobs.end(), s.rows.begin(), s.rows.end());
    st.prompt_full.insert(st.prompt_full.end(), s.full.begin(), s.full.end());
  }
}

void Engine::on_token(RequestState& st, const SampleResult& r, std::vector<CompletionOutput>& finished) {
  std::string text = st.decoder ? st.decoder->step(r.token) : std::string();
  st.last_token = std::chrono::steady_clock::now();
  if (st.tokens.empty()) st.first_token = st.last_token;
  st.tokens.push_back(r.token);
  ++generated_tokens_;
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
  out.finish_reason = st.checker.finished() ? st.checker.reason() : FinishReason::kError;
  out.stop_string = st.checker.stop_string();
  out.stop_token = st.checker.stop_token();
  out.prompt_tokens = st.prompt_len;
  out.completion_tokens = static_cast<int64_t>(st.tokens.size());
  out.logprobs = st.logprobs;
  out.prompt_logprobs_first = st.scoring.on ? st.scoring.first : 0;
  out.prompt_logprobs = st.prompt_logprobs;
  out.prompt_full = st.prompt_full;
  if (!st.tokens.empty()) {
    using secs = std::chrono::duration<double>;
    out.ttft_s = secs(st.first_token - st.arrival).count();
    if (st.tokens.size() > 1)
      out.tpot_s = secs(st.last_token - st.first_token).count() / static_cast<double>(st.tokens.size() - 1);
  }
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

namespace {

nlohmann::json logprobs_to_json(const std::vector<TokenLogprobs>& list) {
  nlohmann::json lps = nlohmann::json::array();
  for (const TokenLogprobs& lp : list) {
    nlohmann::json top = nlohmann::json::array();
    for (const TokenLogprob& t : lp.top) top.push_back({t.token, t.logprob});
    lps.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"rank", lp.rank}, {"top", top}});
  }
  return lps;
}

std::vector<TokenLogprobs> logprobs_from_json(const nlohmann::json& j) {
  std::vector<TokenLogprobs> list;
  for (const auto& lp : j) {
    TokenLogprobs t{lp.at("token").get<int32_t>(), lp.at("logprob").get<float>(), lp.at("rank").get<int64_t>(), {}};
    for (const auto& a : lp.at("top")) t.top.push_back({a.at(0).get<int32_t>(), a.at(1).get<float>()});
    list.push_back(std::move(t));
  }
  return list;
}

}  // namespace

nlohmann::json completion_to_json(const CompletionOutput& out) {
  CONVEYOR_CHECK(out.finish_reason != FinishReason::kNone, "completion_to_json: request ", out.request_id,
                 " has not finished");
  const nlohmann::json lps = logprobs_to_json(out.logprobs);
  nlohmann::json j = {{"request_id", out.request_id},   {"text", out.text},
                      {"token_ids", out.token_ids},     {"finish_reason", finish_reason_name(out.finish_reason)},
                      {"prompt_tokens", out.prompt_tokens}, {"completion_tokens", out.completion_tokens},
                      {"logprobs", lps},                {"error", out.error},
                      {"ttft_s", out.ttft_s},           {"tpot_s", out.tpot_s}};
  if (out.stop_string) j["stop_string"] = *out.stop_string;
  if (out.stop_token) j["stop_token"] = *out.stop_token;
  if (out.prompt_logprobs_first > 0) {
    j["prompt_logprobs_first"] = out.prompt_logprobs_first;
    j["prompt_logprobs"] = logprobs_to_json(out.prompt_logprobs);
  }
  return j;
}

CompletionOutput completion_from_json(const nlohmann::json& j) {
  CompletionOutput out;
  out.request_id = j.at("request_id").get<int64_t>();
  out.text = j.at("text").get<std::string>();
  out.token_ids = j.at("token_ids").get<std::vector<int32_t>>();
  out.finish_reason = parse_finish_reason(j.at("finish_reason").get<std::string>());
  out.prompt_tokens = j.at("prompt_tokens").get<int64_t>();
  out.completion_tokens = j.at("completion_tokens").get<int64_t>();
  out.error = j.at("error").get<std::string>();
  out.ttft_s = j.at("ttft_s").get<double>();
  out.tpot_s = j.at("tpot_s").get<double>();
  if (j.contains("stop_string")) out.stop_string = j["stop_string"].get<std::string>();
  if (j.contains("stop_token")) out.stop_token = j["stop_token"].get<int32_t>();
  out.logprobs = logprobs_from_json(j.at("logprobs"));
  if (j.contains("prompt_logprobs")) {
    out.prompt_logprobs_first = j.at("prompt_logprobs_first").get<int32_t>();
    out.prompt_logprobs = logprobs_from_json(j.at("prompt_logprobs"));
  }
  return out;
}

}  // namespace conveyor
