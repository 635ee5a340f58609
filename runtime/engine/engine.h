// Engine: the single-process generation loop on the leader. It owns the model runner (whose last
// stage samples), the scheduler and, per request, a StopChecker and (when a tokenizer exists) a
// StreamDecoder; it turns each plan's sampled tokens into text, streamed deltas and finished outputs.
// Sampling is keyed by (request seed, output index), so outputs do not depend on batching or
// preemption: the same request gives the same tokens however the scheduler packs it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/core/step_stamps.h"
#include "runtime/engine/model_runner.h"
#include "runtime/engine/request.h"
#include "runtime/engine/scheduler.h"
#include "runtime/sampling/sampler.h"
#include "runtime/sampling/stop_checker.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

class Config;

struct EngineOptions {
  SchedulerConfig scheduler;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  uint64_t seed = 0;          // runtime.seed: seeds requests that bring none
  static EngineOptions from_config(const Config& config);
};

struct CompletionOutput {
  int64_t request_id = 0;
  std::string text;                     // empty without a tokenizer
  std::vector<int32_t> token_ids;
  FinishReason finish_reason = FinishReason::kNone;  // kStop, kLength, or kError (see error)
  std::optional<std::string> stop_string;  // vLLM's stop_reason when a stop string matched
  std::optional<int32_t> stop_token;       // ... or a stop token id
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::vector<TokenLogprobs> logprobs;  // one per token when params.logprobs is set
  // With Request::scoring (prompt_logprobs_first > 0; 0 when not asked): the logprobs of prompt
  // tokens [prompt_logprobs_first, prompt_tokens), and when scoring.full the whole log-softmax of
  // each of their positions (rows x vocab).
  int32_t prompt_logprobs_first = 0;
  std::vector<TokenLogprobs> prompt_logprobs;
  std::vector<float> prompt_full;
  std::string error;                    // why the request failed (FinishReason::kError)
  // Latency, seconds: time to first token from add_request, and mean time per output token after
  // the first (0 with fewer than two tokens).
  double ttft_s = 0;
  double tpot_s = 0;
};

// Called with each piece of text that can no longer change (StopChecker::take_streamable); the
// concatenation of all pieces of a request equals its final text.
using StreamCallback = std::function<void(int64_t request_id, const std::string& delta)>;

// What a batch job or a prompt drives: one Engine, or several replicas behind a router
// (replica_router.h). Requests go in, finished outputs come out of step().
class Generator {
 public:
  virtual ~Generator() = default;
  virtual void add_request(Request request) = 0;
  virtual std::vector<CompletionOutput> step() = 0;
  virtual bool has_unfinished() const = 0;
  virtual const Tokenizer* tokenizer() const = 0;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual int64_t preemptions() const = 0;
  // Tokens sampled so far, those of unfinished requests included: what a progress line counts.
  virtual int64_t generated_tokens() const = 0;
  virtual void shutdown() = 0;
};

// Outputs as JSON and back, for replicas that send them to the job's rank.
nlohmann::json completion_to_json(const CompletionOutput& out);
CompletionOutput completion_from_json(const nlohmann::json& j);

class Engine final : public Generator {
 public:
  // tokenizer may be null: prompts are then token ids, outputs carry no text and stop strings are refused.
  Engine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<Tokenizer> tokenizer, EngineOptions options);
  ~Engine();

  // Validates and queues a request (throws conveyor::Error naming it when invalid).
  void add_request(Request request) override;
  // Text prompt -> ids with the tokenizer (BOS as the tokenizer asks); throws when there is none.
  std::vector<int32_t> encode(const std::string& text) const override;

  // Fills the runner with plans (up to its max_in_flight micro-batches), then takes the oldest plan's
  // sampled tokens through stop checks. Returns the requests that finished (or failed).
  std::vector<CompletionOutput> step() override;
  bool has_unfinished() const override { return !states_.empty(); }
  // Runs the requests to completion; outputs in the order of `requests`.
  std::vector<CompletionOutput> generate(std::vector<Request> requests);

  void set_stream_callback(StreamCallback cb) { stream_ = std::move(cb); }
  // Stamps each step's scheduling, its wait for the runner's result and the bookkeeping after it
  // (`conveyor bench --step-timeline`); not owned, null: none.
  void set_step_stamps(StepStamps* stamps) { stamps_ = stamps; }
  const SchedulerStats& scheduler_stats() const { return scheduler_.stats(); }
  const Scheduler& scheduler() const { return scheduler_; }
  const ModelRunner& runner() const { return *runner_; }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  int64_t preemptions() const override { return scheduler_.stats().preemptions; }
  int64_t generated_tokens() const override { return generated_tokens_; }
  int64_t max_model_len() const { return max_model_len_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  int plans_in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Waits for the plans still in flight (their tokens are dropped: the requests stay unfinished, a
  // resumed job redoes them), then tells the runner the run is over (the pipeline's other ranks
  // stop). Called by the destructor too; idempotent.
  void shutdown() override;

 private:
  struct RequestState;
  void on_token(RequestState& st, const SampleResult& r, std::vector<CompletionOutput>& finished);
  void on_scores(const StepResult& result);
  CompletionOutput finish_output(const RequestState& st);
  void fail_refused(std::vector<CompletionOutput>& finished);
  bool submit_next();
  void retire(const std::vector<CompletionOutput>& finished);

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Tokenizer> tokenizer_;
  int64_t generated_tokens_ = 0;
  int64_t max_model_len_;
  uint64_t seed_;
  Scheduler scheduler_;
  std::vector<int32_t> eos_ids_;
  std::map<int64_t, std::unique_ptr<RequestState>> states_;
  StreamCallback stream_;
  std::deque<StepPlan> in_flight_;     // submitted, oldest first
  std::set<int64_t> announced_;        // sequences the sampling stage knows
  std::vector<int64_t> to_retire_;     // finished since the last submitted plan
  bool eos_sent_ = false;
  StepStamps* stamps_ = nullptr;
};

}  // namespace conveyor
