// Batch output records, manifest and the durable append-only writer (see output.h). Each line is
// written with a single write(2) on an O_APPEND descriptor, so a kill leaves at most one torn line at
// the end, which open() detects (no newline or not JSON) and truncates away.
#include "runtime/batch/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

using nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool file_exists(const std::string& path, off_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (size) *size = st.st_size;
  return true;
}

json usage(int64_t prompt, int64_t completion) {
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  CONVEYOR_THROW(what, " '", path, "' failed: ", std::strerror(errno),
                 "; check that the directory exists, is writable and has free space");
}

}  // namespace

std::string random_id(const std::string& prefix) {
  // Seeded once per process from the OS and the clock; ids only need to be unique, not secret.
  static std::mt19937_64 rng(std::random_device{}() ^
                             static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  static const char* kHex = "0123456789abcdef";
  std::string id = prefix;
  for (int part = 0; part < 2; ++part) {
    uint64_t v = rng();
    for (int k = 0; k < 16; ++k) id.push_back(kHex[(v >> (4 * k)) & 0xf]);
  }
  return id;
}

json make_result_record(const BatchResult& r, const std::string& request_id) {
  bool chat = r.endpoint == Endpoint::kChatCompletions;
  std::string text = utf8_lossy(r.text);
  json choice = {{"index", 0}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  CONVEYOR_CHECK(r.finish_reason == FinishReason::kStop || r.finish_reason == FinishReason::kLength,
                 "batch result of custom_id '", r.custom_id, "' has no OpenAI finish_reason (a failed request is "
                 "an error line, not a result)");
  choice["finish_reason"] = finish_reason_name(r.finish_reason);
  choice["logprobs"] = r.logprobs;
  if (!r.prompt_logprobs.is_null()) choice["prompt_logprobs"] = r.prompt_logprobs;
  choice["token_ids"] = r.token_ids;
  int64_t created = r.created != 0 ? r.created : static_cast<int64_t>(std::time(nullptr));
  json body = {{"id", random_id(chat ? "chatcmpl-" : "cmpl-")},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", r.model},
               {"choices", json::array({choice})},
               {"usage", usage(r.prompt_tokens, static_cast<int64_t>(r.token_ids.size()))}};
  return {{"id", random_id("batch_req_")},
          {"custom_id", r.custom_id},
          {"response", {{"status_code", 200}, {"request_id", request_id}, {"body", body}}},
          {"error", nullptr}};
}

json make_error_record(const std::optional<std::string>& custom_id, int64_t line, int status_code,
                       const std::string& message, const std::string& request_id) {
  json error = {{"message", utf8_lossy(message)},
                {"type", status_code < 500 ? "invalid_request_error" : "server_error"},
                {"param", nullptr},
                {"code", nullptr}};
  json id = custom_id ? json(utf8_lossy(*custom_id)) : json(nullptr);
  return {{"id", random_id("batch_req_")},
          {"custom_id", id},
          {"response", {{"status_code", status_code}, {"request_id", request_id}, {"body", {{"error", error}}}}},
          {"error", nullptr},
          {"line", line}};
}

// ---- manifest ---------------------------------------------------------------------------------------

namespace {

void refuse_if_different(const BatchOutputOptions& o, const std::vector<std::string>& diffs) {
  if (diffs.empty()) return;
  std::string list;
  for (const auto& d : diffs) list += "\n  " + d;
  CONVEYOR_THROW("refusing to resume into '", o.output_path, "': it belongs to a different job:", list,
                 "\nRerun with the original input and model, or choose another --output (or delete '", o.output_path,
                 "' and '", manifest_path_for(o.output_path), "') to start over.");
}

// Writes the manifest of a fresh job, or checks a resume against the one there (returned).
std::optional<BatchManifest> check_or_write_manifest(const BatchOutputOptions& o) {
  std::string path = manifest_path_for(o.output_path);
  off_t output_size = 0;
  bool output_exists = file_exists(o.output_path, &output_size);
  std::optional<BatchManifest> previous = read_manifest(path);
  if (!previous) {
    CONVEYOR_CHECK(!output_exists || output_size == 0, "the output '", o.output_path,
                   "' already has content but no manifest '", path,
                   "', so conveyor cannot tell which job wrote it; choose another --output or move that file away");
    write_manifest(o.manifest, path);
    return std::nullopt;
  }
  refuse_if_different(o, o.manifest.differences(*previous));
  return previous;
}

}  // namespace

// ---- writer ---------------------------------------------------------------------------------------

BatchOutputWriter::BatchOutputWriter(BatchOutputOptions options) : options_(std::move(options)) {
  CONVEYOR_CHECK(!options_.output_path.empty(), "no output path given; pass --output results.jsonl");
  if (options_.errors_path.empty()) options_.errors_path = options_.output_path + ".errors.jsonl";
  CONVEYOR_CHECK(options_.errors_path != options_.output_path, "the error file and the output are the same file '",
                 options_.output_path, "'; give a different --errors path");
  for (const std::string* path : {&options_.output_path, &options_.errors_path}) {
    struct stat st {};
    if (::stat(path->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      CONVEYOR_THROW("the ", path == &options_.output_path ? "output" : "error file", " '", *path,
                     "' is a directory; name a file, e.g. '", *path, "/results.jsonl'");
    }
  }
  lock_ = OutputLock(options_.output_path);  // before anything of the job's files is read or written
  previous_ = check_or_write_manifest(options_);
  output_.path = options_.output_path;
  errors_.path = options_.errors_path;
  open_file(&output_, /*is_output=*/true);
  open_file(&errors_, /*is_output=*/false);
  last_sync_s_ = now_s();
}

BatchOutputWriter::~BatchOutputWriter() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() was the place to see the error.
  }
}

// Reads the existing lines: ids go into done_, a torn last line is truncated away. A bad line that is
// not the last one means the file was edited or corrupted: stop rather than guess.
void BatchOutputWriter::open_file(File* f, bool is_output) {
  off_t good_end = 0;
  int64_t line_no = 0;
  int64_t duplicates = 0;
  std::string first_duplicate;
  {
    std::ifstream in(f->path, std::ios::binary);
    std::string text;
    off_t offset = 0;
    while (in.good() && std::getline(in, text)) {
      ++line_no;
      bool has_newline = !in.eof();
      json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
      bool ok = has_newline && !j.is_discarded() && j.is_object();
      if (!ok) {
        in.peek();
        CONVEYOR_CHECK(in.eof(), "'", f->path, "' line ", line_no,
                       " is not a complete JSON record but more lines follow; the file was edited or corrupted. "
                       "Fix or delete that line, then rerun to resume");
        break;
      }
      offset += static_cast<off_t>(text.size()) + 1;
      good_end = offset;
      auto id = j.find("custom_id");
      if (id != j.end() && id->is_string()) {
        bool fresh = done_.insert(id->get<std::string>()).second;
        if (is_output && !fresh && duplicates++ == 0) first_duplicate = id->get<std::string>();
      }
      if (is_output) {
        ++resumed_results_;
      } else if (j.contains("line") && j["line"].is_number_integer() && j["line"].get<int64_t>() > 0) {
        error_keys_.insert("line:" + std::to_string(j["line"].get<int64_t>()));
      }
    }
  }
  // Checked before anything is truncated: the file is left as it was for the user to inspect.
  CONVEYOR_CHECK(duplicates == 0, "refusing to resume into '", f->path, "': ", duplicates,
                 " custom_id(s) appear more than once (the first is '", first_duplicate,
                 "'), so two jobs wrote it at once or it was concatenated. Keep one line per custom_id "
                 "(e.g. jq -c -s 'unique_by(.custom_id)[]' FILE > FILE.dedup, then move that over FILE) and "
                 "rerun to resume, or start over with a new --output");
  f->fd = ::open(f->path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (f->fd < 0) throw_errno("opening", f->path);
  off_t size = ::lseek(f->fd, 0, SEEK_END);
  if (size > good_end) {
    dropped_torn_bytes_ += size - good_end;
    if (::ftruncate(f->fd, good_end) != 0) throw_errno("truncating the torn last line of", f->path);
    if (::fsync(f->fd) != 0) throw_errno("syncing", f->path);
  }
}

void BatchOutputWriter::append_line(File* f, const json& record) {
  CONVEYOR_CHECK(f->fd >= 0, "writing to '", f->path, "' after close()");
  std::string line = record.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(f->fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;  // a stop signal arrived mid-write: finish the line
    if (n < 0) throw_errno("appending to", f->path);
    done += static_cast<size_t>(n);
  }
  f->dirty = true;
  sync_if_due();
}

void BatchOutputWriter::write_result(const BatchResult& r) {
  append_line(&output_, make_result_record(r, random_id("req_")));
  done_.insert(r.custom_id);
  ++results_written_;
}

void BatchOutputWriter::write_error(const std::optional<std::string>& custom_id, int64_t line,
                                    const std::string& message, int status_code) {
  std::string key = "line:" + std::to_string(line);
  if (line > 0 && error_keys_.count(key)) return;  // written by an earlier run of the same input
  append_line(&errors_, make_error_record(custom_id, line, status_code, message, random_id("req_")));
  if (line > 0) error_keys_.insert(key);
  if (custom_id) done_.insert(*custom_id);
  ++errors_written_;
}

void BatchOutputWriter::confirm_model_files(const std::vector<WeightFileInfo>& files) {
  bool resumed = previous_ && resumed_results_ > 0;
  if (files.empty()) {
    if (resumed && previous_->has_digests())
      spdlog::warn("model.hash_weights is off: the model's content is not compared with the run that wrote '{}'",
                   options_.output_path);
    return;
  }
  options_.manifest.model_files = files;
  options_.manifest.has_model_files = true;
  if (previous_) {
    refuse_if_different(options_, options_.manifest.content_differences(*previous_));
    if (resumed && !previous_->has_digests())
      spdlog::warn("the manifest '{}' records no digests of the model files (written by an older conveyor, or the run "
                   "stopped while loading), so the model cannot be checked against the run that wrote '{}'; "
                   "recording them now", manifest_path_for(options_.output_path), options_.output_path);
  }
  write_manifest(options_.manifest, manifest_path_for(options_.output_path));
}

void BatchOutputWriter::sync_if_due() {
  if (now_s() - last_sync_s_ >= options_.fsync_interval) sync();
}

void BatchOutputWriter::sync() {
  for (File* f : {&output_, &errors_}) {
    if (f->fd >= 0 && f->dirty) {
      if (::fsync(f->fd) != 0) throw_errno("syncing", f->path);
      f->dirty = false;
    }
  }
  last_sync_s_ = now_s();
}

void BatchOutputWriter::close() {
  if (output_.fd < 0 && errors_.fd < 0) {
    lock_.release();
    return;
  }
  sync();
  for (File* f : {&output_, &errors_}) {
    if (f->fd >= 0 && ::close(f->fd) != 0) {
      f->fd = -1;
      throw_errno("closing", f->path);
    }
    f->fd = -1;
  }
  lock_.release();
}

}  // namespace conveyor
