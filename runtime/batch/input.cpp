// Parsing and validation of batch input JSONL (see runtime/batch/input.h). Each line is parsed on its own; a
// reason for rejecting it is thrown as conveyor::Error inside parse_line and caught per line, so one
// bad line never stops the others. Duplicate custom_ids are resolved after all lines are read.
#include "runtime/batch/input.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/batch/request_fields.h"
#include "runtime/batch/prompt_logprobs.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

using nlohmann::json;

const std::vector<std::string> kUrls = {"/v1/completions", "/v1/chat/completions"};
const std::vector<std::string> kRoles = {"system", "user", "assistant"};

std::string clip(const std::string& s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; }

std::vector<int32_t> read_token_ids(const json& list) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 &&
              v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!ok) {
      CONVEYOR_THROW("'prompt' as token ids must hold non-negative 32-bit integers; element ", i, " is ",
                     clip(v.dump()));
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

void read_prompt(const json& body, BatchRequest* r) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) CONVEYOR_THROW("a completions request needs 'prompt' in its body");
  const json& p = *it;
  if (p.is_string()) {
    r->prompt_text = p.get<std::string>();
    if (r->prompt_text.empty()) CONVEYOR_THROW("'prompt' is empty; give text or a list of token ids");
    return;
  }
  if (!p.is_array()) CONVEYOR_THROW("'prompt' must be a string or a list of token ids, got ", p.type_name());
  if (p.empty()) CONVEYOR_THROW("'prompt' is an empty list; give text or a list of token ids");
  if (p[0].is_string() || p[0].is_array()) {
    CONVEYOR_THROW("'prompt' holds ", p.size(), " prompts; several prompts in one request are not supported, "
                   "write one line per prompt");
  }
  r->prompt_ids = read_token_ids(p);
}

std::string read_content(const json& content, size_t index) {
  if (content.is_string()) return content.get<std::string>();
  // OpenAI content parts: only text parts carry meaning for a text model; join them as HF does not.
  if (content.is_array()) {
    std::string text;
    for (const json& part : content) {
      bool text_part = part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                       part["text"].is_string();
      if (!text_part) {
        CONVEYOR_THROW("messages[", index, "].content has a part that is not {\"type\": \"text\", \"text\": ...}: ",
                       clip(part.dump()), "; only text is supported");
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  CONVEYOR_THROW("messages[", index, "].content must be a string or a list of text parts, got ",
                 content.type_name());
}

void read_messages(const json& body, BatchRequest* r) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) CONVEYOR_THROW("a chat request needs 'messages' in its body");
  if (!it->is_array() || it->empty()) CONVEYOR_THROW("'messages' must be a non-empty list of {role, content}");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) CONVEYOR_THROW("messages[", i, "] must be an object {role, content}");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) CONVEYOR_THROW("messages[", i, "] needs a string 'role'");
    std::string name = role->get<std::string>();
    bool known = false;
    for (const auto& k : kRoles) known = known || k == name;
    if (!known) {
      CONVEYOR_THROW("messages[", i, "].role '", clip(name), "' is not supported; use system, user or assistant",
                     did_you_mean(name, kRoles));
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) CONVEYOR_THROW("messages[", i, "] needs 'content'");
    r->messages.push_back({name, read_content(*content, i)});
  }
}

// The body shared by both line forms: prompt or messages, model and sampling parameters.
void read_body(const json& body, const BatchInputOptions& options, BatchRequest* r) {
  if (r->endpoint == Endpoint::kCompletions) {
    if (body.contains("messages")) CONVEYOR_THROW("'messages' belongs to /v1/chat/completions, not /v1/completions");
    read_prompt(body, r);
  } else {
    if (body.contains("prompt")) CONVEYOR_THROW("'prompt' belongs to /v1/completions, not /v1/chat/completions");
    read_messages(body, r);
  }
  auto model = body.find("model");
  if (model != body.end() && !model->is_null()) {
    if (!model->is_string()) CONVEYOR_THROW("'model' must be a string");
    r->model = model->get<std::string>();
  }
  r->sampling = SamplingParams::from_json(body, options.defaults);
  r->ignored_fields = check_body_fields(body);
  r->prompt_logprobs = read_prompt_logprobs(body);
}

void read_openai_line(const json& j, const BatchInputOptions& options, BatchRequest* r) {
  auto id = j.find("custom_id");
  if (id == j.end() || id->is_null()) CONVEYOR_THROW("OpenAI batch line without 'custom_id'");
  if (!id->is_string() || id->get<std::string>().empty()) CONVEYOR_THROW("'custom_id' must be a non-empty string");
  r->custom_id = id->get<std::string>();
  auto method = j.find("method");
  if (method != j.end() && !(method->is_string() && method->get<std::string>() == "POST")) {
    CONVEYOR_THROW("'method' must be \"POST\", got ", clip(method->dump()));
  }
  auto url = j.find("url");
  if (url == j.end() || !url->is_string()) CONVEYOR_THROW("OpenAI batch line without a string 'url'");
  std::string u = url->get<std::string>();
  if (u == kUrls[0]) {
    r->endpoint = Endpoint::kCompletions;
  } else if (u == kUrls[1]) {
    r->endpoint = Endpoint::kChatCompletions;
  } else {
    CONVEYOR_THROW("unknown url '", clip(u), "'; supported: ", join(kUrls, ", "), did_you_mean(u, kUrls));
  }
  auto body = j.find("body");
  if (body == j.end() || !body->is_object()) CONVEYOR_THROW("OpenAI batch line without an object 'body'");
  read_body(*body, options, r);
}

// A plain line is its own body; which endpoint follows from whether it has messages or a prompt.
void read_plain_line(const json& j, const BatchInputOptions& options, BatchRequest* r) {
  bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
  if (has_prompt && has_messages) CONVEYOR_THROW("a line has both 'prompt' and 'messages'; give one");
  if (!has_prompt && !has_messages) {
    CONVEYOR_THROW("a line needs 'prompt' or 'messages' (plain form), or custom_id/url/body (OpenAI Batch form)");
  }
  r->custom_id = kLineIdPrefix + std::to_string(r->line);
  r->endpoint = has_messages ? Endpoint::kChatCompletions : Endpoint::kCompletions;
  read_body(j, options, r);
}

// A line that is not valid UTF-8 fails, but its custom_id is usually readable: parse a lossy copy and
// keep the id when the raw line holds it byte for byte (an id with the bad bytes in it is not recovered).
BatchLineError invalid_utf8_error(const std::string& text, size_t bad, int64_t line) {
  std::optional<std::string> id;
  const json j = json::parse(utf8_lossy(text), nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("custom_id") && j["custom_id"].is_string()) {
    const std::string s = j["custom_id"].get<std::string>();
    if (!s.empty() && text.find(json(s).dump()) != std::string::npos) id = s;
  }
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  return BatchLineError{line, id, detail::concat("the line is not valid UTF-8 (byte ", byte, " at column ", bad + 1,
                                                 "); write the request as UTF-8 JSON")};
}

// Parses one non-blank line; on failure returns the error with the custom_id when one was readable.
std::optional<BatchLineError> parse_line(const std::string& text, const BatchInputOptions& options,
                                         BatchRequest* r) {
  if (const size_t bad = utf8_first_invalid(text); bad != std::string::npos) {
    return invalid_utf8_error(text, bad, r->line);
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return BatchLineError{r->line, std::nullopt, std::string("malformed JSON: ") + e.what()};
  }
  if (!j.is_object()) return BatchLineError{r->line, std::nullopt, std::string("a line must be a JSON object, got ") + j.type_name()};
  try {
    bool openai = j.contains("custom_id") || j.contains("url") || j.contains("body");
    if (openai) {
      read_openai_line(j, options, r);
    } else {
      read_plain_line(j, options, r);
    }
    return std::nullopt;
  } catch (const Error& e) {
    std::optional<std::string> id;
    if (!r->custom_id.empty()) id = r->custom_id;
    return BatchLineError{r->line, id, e.message()};
  }
}

// Every occurrence of a repeated custom_id becomes an error naming all its lines; none of them runs,
// since the output could not tell their results apart. Invalid lines that named an id count too.
void reject_duplicates(BatchInput* input) {
  std::map<std::string, std::vector<int64_t>> lines_of;
  for (const auto& r : input->requests) lines_of[r.custom_id].push_back(r.line);
  for (const auto& e : input->errors) {
    if (e.custom_id) lines_of[*e.custom_id].push_back(e.line);
  }
  for (auto& [id, lines] : lines_of) std::sort(lines.begin(), lines.end());
  std::vector<BatchRequest> kept;
  for (auto& r : input->requests) {
    const auto& lines = lines_of[r.custom_id];
    if (lines.size() == 1) {
      kept.push_back(std::move(r));
      continue;
    }
    std::vector<std::string> names;
    for (int64_t l : lines) names.push_back(std::to_string(l));
    input->errors.push_back({r.line, r.custom_id,
                             detail::concat("duplicate custom_id '", clip(r.custom_id), "' on lines ", join(names, ", "),
                                            "; custom_ids must be unique, so none of these lines runs")});
  }
  input->requests = std::move(kept);
  std::stable_sort(input->errors.begin(), input->errors.end(),
                   [](const BatchLineError& a, const BatchLineError& b) { return a.line < b.line; });
}

}  // namespace

const char* endpoint_url(Endpoint e) {
  return e == Endpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
}

std::string describe_line_error(const BatchLineError& e, const std::string& origin) {
  std::string id = e.custom_id ? " (custom_id '" + clip(*e.custom_id) + "')" : "";
  return detail::concat(origin, ":", e.line, id, ": ", e.reason);
}

BatchInput parse_batch_input(std::istream& in, const BatchInputOptions& options) {
  BatchInput input;
  std::string text;
  while (std::getline(in, text)) {
    ++input.lines;
    if (!text.empty() && text.back() == '\r') text.pop_back();  // files written on Windows
    if (trim(text).empty()) continue;
    BatchRequest r;
    r.line = input.lines;
    if (auto err = parse_line(text, options, &r)) {
      input.errors.push_back(std::move(*err));
    } else {
      input.requests.push_back(std::move(r));
    }
  }
  reject_duplicates(&input);
  for (const BatchRequest& r : input.requests)
    for (const std::string& f : r.ignored_fields) ++input.ignored_fields[f];
  if (options.strict && !input.errors.empty()) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < input.errors.size() && i < kStrictErrorsShown; ++i) {
      shown.push_back("  " + describe_line_error(input.errors[i], options.origin));
    }
    CONVEYOR_THROW(input.errors.size(), " invalid line(s) in ", options.origin, " and strict mode is on; fix them "
                   "or run without --strict to skip them into the error file:\n", join(shown, "\n"),
                   input.errors.size() > shown.size() ? "\n  ..." : "");
  }
  return input;
}

BatchInput read_batch_input(const std::string& path, BatchInputOptions options) {
  std::error_code ec;
  // A directory opens as a stream that reads nothing: it would pass for an empty input.
  if (std::filesystem::is_directory(path, ec)) {
    CONVEYOR_THROW("the batch input '", path, "' is a directory; --input names a JSONL file of requests");
  }
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot open the batch input '", path, "'; check the --input path");
  options.origin = path;
  BatchInput input = parse_batch_input(in, options);
  CONVEYOR_CHECK(!in.bad(), "read error in the batch input '", path, "' after line ", input.lines);
  return input;
}

}  // namespace conveyor
