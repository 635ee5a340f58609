// Requests of an offline batch job, read from JSONL and validated before any model work: OpenAI Batch
// lines ({custom_id, method, url, body}) or plain lines ({"prompt": ...} / {"messages": [...]}, whose
// id is "line-N"). Every invalid line becomes a BatchLineError (line number, id when known, reason);
// valid lines still run. Invariant: ids of the returned requests are unique, and a custom_id that
// occurs more than once is an error on every occurrence (as the OpenAI Batch API rejects duplicates).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampling/params.h"
#include "runtime/tokenizer/chat_template.h"

namespace conveyor {

enum class Endpoint { kCompletions, kChatCompletions };
const char* endpoint_url(Endpoint e);  // "/v1/completions"

struct BatchRequest {
  std::string custom_id;  // from the line, or "line-N" for plain lines
  int64_t line = 0;       // 1-based line number in the input
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                 // body.model, "" when absent
  std::string prompt_text;           // completions with a text prompt
  std::vector<int32_t> prompt_ids;   // completions with a token-id prompt (then prompt_text is "")
  std::vector<ChatMessage> messages; // chat completions
  SamplingParams sampling;
  std::vector<std::string> ignored_fields;  // body fields that change nothing here (check_body_fields)
  std::optional<int64_t> prompt_logprobs;  // vLLM's prompt_logprobs (prompt_logprobs.h)

  bool prompt_is_ids() const { return !prompt_ids.empty(); }
};

struct BatchLineError {
  int64_t line = 0;
  std::optional<std::string> custom_id;  // none when the line did not say (e.g. malformed JSON)
  std::string reason;
};

struct BatchInput {
  std::vector<BatchRequest> requests;  // in input order
  std::vector<BatchLineError> errors;  // in line order
  int64_t lines = 0;                   // lines read, blank ones included
  std::map<std::string, int64_t> ignored_fields;  // field -> requests that carried it, for the summary
};

struct BatchInputOptions {
  SamplingParams defaults;  // request bodies override these field by field
  // Any invalid line makes parsing throw, listing the first kStrictErrorsShown errors.
  bool strict = false;
  std::string origin = "<input>";  // file name used in messages
};
constexpr size_t kStrictErrorsShown = 5;

// Plain lines become "line-N" ids; this is the prefix.
constexpr const char* kLineIdPrefix = "line-";

BatchInput parse_batch_input(std::istream& in, const BatchInputOptions& options);
// Opens `path` (error naming it when unreadable) and parses it with origin = path.
BatchInput read_batch_input(const std::string& path, BatchInputOptions options);

// "requests.jsonl:12 (custom_id 'a'): reason" — how an error is shown to a user.
std::string describe_line_error(const BatchLineError& e, const std::string& origin);

}  // namespace conveyor
