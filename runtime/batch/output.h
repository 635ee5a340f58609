// Durable, resumable output of an offline batch job: OpenAI Batch output lines appended one per
// finished request (written with one write(2) each, fsync'd at least every fsync_interval seconds and
// at close), an error file in the OpenAI error shape, and a manifest <output>.manifest.json that ties
// the output to its input (SHA-256), model and sampling defaults. Invariant after open(): both files end
// in a newline and hold only complete JSON lines; a torn last line left by a killed run is cut off.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/batch/input.h"
#include "runtime/batch/manifest.h"
#include "runtime/batch/output_lock.h"
#include "runtime/sampling/stop_checker.h"

namespace conveyor {

// One finished request as the engine reports it.
struct BatchResult {
  std::string custom_id;
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::string text;                // may end inside a UTF-8 character: records carry it through utf8_lossy
  std::vector<int32_t> token_ids;  // generated ids
  FinishReason finish_reason = FinishReason::kLength;  // kStop or kLength (written as "stop" / "length")
  int64_t prompt_tokens = 0;
  nlohmann::json logprobs;         // null, or the OpenAI-shaped logprobs object
  nlohmann::json prompt_logprobs;  // null, or vLLM's prompt_logprobs array (prompt_logprobs.h)
  int64_t created = 0;             // unix seconds; 0: now
};

// The OpenAI Batch output line for `r` ({id, custom_id, response{status_code, request_id, body}, error}).
nlohmann::json make_result_record(const BatchResult& r, const std::string& request_id);
// An error line: response{status_code, request_id, body{error{message, type, param, code}}}, error null,
// plus "line" (the input line, 0 when unknown) so a user can find it.
nlohmann::json make_error_record(const std::optional<std::string>& custom_id, int64_t line, int status_code,
                                 const std::string& message, const std::string& request_id);
// A fresh random id with a prefix: "batch_req_" + 32 hex digits.
std::string random_id(const std::string& prefix);

struct BatchOutputOptions {
  std::string output_path;
  std::string errors_path;       // "" -> <output>.errors.jsonl
  double fsync_interval = 2.0;   // seconds; 0 syncs every line
  BatchManifest manifest;
};

// Appends results and errors; not thread-safe (the leader owns it).
class BatchOutputWriter {
 public:
  // Takes the output's lock first (refusing while another job holds it, see output_lock.h), then
  // creates the files, or resumes them: checks the manifest (refusing a different input, model or
  // sampling defaults), drops a torn last line, refuses a custom_id found twice in the output and
  // collects the ids already written.
  explicit BatchOutputWriter(BatchOutputOptions options);
  ~BatchOutputWriter();  // close() that swallows errors; call close() to see them
  BatchOutputWriter(const BatchOutputWriter&) = delete;
  BatchOutputWriter& operator=(const BatchOutputWriter&) = delete;

  // Ids with a line in the output or the error file from earlier runs; the job skips them.
  bool is_done(const std::string& custom_id) const { return done_.count(custom_id) > 0; }
  const std::unordered_set<std::string>& done_ids() const { return done_; }
  int64_t resumed_results() const { return resumed_results_; }  // output lines found at open
  int64_t dropped_torn_bytes() const { return dropped_torn_bytes_; }
  const std::string& errors_path() const { return options_.errors_path; }

  void write_result(const BatchResult& r);
  // An invalid input line (validation) or a failed request. A line already in the error file from an
  // earlier run (same custom_id, or same line number when it has none) is not written twice.
  void write_error(const std::optional<std::string>& custom_id, int64_t line, const std::string& message,
                   int status_code = 400);
  void write_error(const BatchLineError& e) { write_error(e.custom_id, e.line, e.reason); }

  // Once the weights have loaded: compares the model files' digests with the earlier run's (refusing,
  // naming the file, when one differs; warning when the earlier run recorded none although it wrote
  // results) and records them in the manifest. `files` empty: hashing was off, nothing to compare.
  void confirm_model_files(const std::vector<WeightFileInfo>& files);

  // fsyncs when fsync_interval has passed since the last sync; the engine may call it when idle.
  void sync_if_due();
  void sync();   // fsync both files now
  void close();  // sync, close and release the lock; idempotent

  int64_t results_written() const { return results_written_; }  // this run
  int64_t errors_written() const { return errors_written_; }

 private:
  struct File {
    std::string path;
    int fd = -1;
    bool dirty = false;
  };
  void open_file(File* f, bool is_output);
  void append_line(File* f, const nlohmann::json& record);

  BatchOutputOptions options_;
  std::optional<BatchManifest> previous_;  // the manifest found at open (a resume)
  OutputLock lock_;  // held from before the first read of any file until close()
  File output_, errors_;
  std::unordered_set<std::string> done_;
  std::unordered_set<std::string> error_keys_;  // custom_id or "line:N" of error lines present
  int64_t resumed_results_ = 0;
  int64_t dropped_torn_bytes_ = 0;
  int64_t results_written_ = 0;
  int64_t errors_written_ = 0;
  double last_sync_s_ = 0;
};

}  // namespace conveyor
