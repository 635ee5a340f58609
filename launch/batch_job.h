// An offline batch job driven by the pipeline's leader: requests JSONL in, OpenAI Batch results out,
// resumable. The job is opened (input read and validated, invalid lines written to the error file,
// the output's manifest checked) before any model work; requests already in the output are skipped;
// a stop signal ends admission, flushes what finished and exits with kExitInterrupted (rerun resumes).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/batch/input.h"
#include "runtime/batch/output.h"
#include "runtime/batch/summary.h"
#include "runtime/config/config.h"
#include "runtime/engine/engine.h"

namespace conveyor {

struct BatchJobOptions {
  std::string input, output, errors;
  bool strict = false;
  std::string model;                // path, recorded in the manifest and the results
  bool model_has_files = false;     // a checkpoint (not dummy weights): its files go in the manifest
  // Names a request's `model` may give (--served-model-name, else the --model path and its file name);
  // the first is what a result names when its request gave none.
  std::vector<std::string> served_model_names;
  std::string chat_template_name;   // --chat-template, "" to detect from the model
  std::string model_chat_template;  // the model's Jinja template, "" when it has none
};

class BatchJob {
 public:
  // Reads and validates the input and opens (or resumes) the output; no model work. Throws on a
  // --strict input with invalid lines or a resume the manifest forbids.
  BatchJob(const Config& cfg, BatchJobOptions options);
  ~BatchJob();
  // After the weights loaded, before any request: checks the model files' digests against the
  // earlier run's and records them (see BatchOutputWriter::confirm_model_files).
  void confirm_model_files(const std::vector<WeightFileInfo>& files) { writer_->confirm_model_files(files); }
  // Runs every pending request; returns 0, or kExitInterrupted after a stop signal.
  int run(Generator& engine);
  // The tokens a pending request's sequence takes, on average over the first kSeqLenSample pending
  // requests: its prompt (token ids as given; text and chat through `tok`) plus max_tokens, at most
  // `context`; a request without max_tokens, or with a text prompt and no tokenizer, counts `context`. 0
  // when nothing is pending. The batch from memory is chosen for it (runtime/engine/batch_budget.h).
  int64_t expected_seq_len(const Tokenizer* tok, int64_t context) const;
  static constexpr size_t kSeqLenSample = 1000;
  const BatchJobStats& stats() const { return stats_; }

 private:
  void admit(Generator& engine);
  void record(const CompletionOutput& out, const Tokenizer* tok);
  const std::string& served_name() const;

  BatchJobOptions opt_;
  double progress_interval_;
  BatchInput input_;
  std::unique_ptr<BatchOutputWriter> writer_;
  BatchJobStats stats_;
  std::map<int64_t, const BatchRequest*> by_id_;  // engine request id -> its input line (in input_)
};

}  // namespace conveyor
