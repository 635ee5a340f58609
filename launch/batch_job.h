// An offline batch job driven by the pipeline's leader: requests JSONL in, OpenAI Batch results out,
// resumable. The job is opened (input read and validated, invalid lines written to the error file,
// the output's manifest checked) before any model work; requests already in the output are skipped;
// a stop signal ends admission, flushes what finished and exits with kExitInterrupted (rerun resumes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/batch/input.h"
#include "runtime/batch/output.h"
#include "runtime/config/config.h"
#include "runtime/engine/engine.h"

namespace conveyor {

struct BatchJobOptions {
  std::string input, output, errors;
  bool strict = false;
  std::string model;                // path, recorded in the manifest and the results
  std::string chat_template_name;   // --chat-template, "" to detect from the model
  std::string model_chat_template;  // the model's Jinja template, "" when it has none
};

// The model's chat template text: GGUF tokenizer.chat_template or tokenizer_config.json's chat_template.
std::string model_chat_template(const std::string& model_path);

// What a finished (or interrupted) job did, for the summary.
struct BatchJobStats {
  int64_t total = 0, resumed = 0, done = 0, failed = 0, invalid_lines = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, preemptions = 0;
  double elapsed_s = 0;
  std::vector<double> ttft_s, tpot_s;  // per request with output (tpot: with two or more tokens)
  bool interrupted = false;
};

class BatchJob {
 public:
  // Reads and validates the input and opens (or resumes) the output; no model work. Throws on a
  // --strict input with invalid lines or a resume the manifest forbids.
  BatchJob(const Config& cfg, BatchJobOptions options);
  ~BatchJob();
  // Runs every pending request; returns 0, or kExitInterrupted after a stop signal.
  int run(Generator& engine);
  const BatchJobStats& stats() const { return stats_; }

 private:
  BatchJobOptions opt_;
  double progress_interval_;
  BatchInput input_;
  std::unique_ptr<BatchOutputWriter> writer_;
  BatchJobStats stats_;
};

// The --summary JSON: counts, rates, TTFT/TPOT p50/p90/p99, preemptions, and `pipeline` (the usage
// summary with per-stage busy/bubble %) when given.
nlohmann::json batch_summary_json(const BatchJobStats& stats, const nlohmann::json& pipeline);
// The OpenAI logprobs object of a choice: completions {tokens, token_logprobs, top_logprobs,
// text_offset}; chat {content: [{token, logprob, bytes, top_logprobs}]}. Null without logprobs.
nlohmann::json openai_logprobs(const CompletionOutput& out, Endpoint endpoint, const Tokenizer* tok);

}  // namespace conveyor
