// Request-body field table (see request_fields.h). Fields are named as OpenAI's and vLLM's request
// schemas name them; a refused field passes when it holds its inert value (stream: false, tools: []),
// because clients often send the defaults explicitly.
#include "runtime/batch/request_fields.h"

#include <algorithm>
#include <functional>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {
namespace {

using nlohmann::json;

// Read by SamplingParams::from_json (which refuses their unsupported values) or by read_body.
const char* const kUsed[] = {"model", "n", "temperature", "top_p", "top_k", "min_p", "seed",
                             "repetition_penalty", "presence_penalty", "frequency_penalty", "max_tokens",
                             "max_completion_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos",
                             "include_stop_str_in_output", "skip_special_tokens", "logprobs", "top_logprobs",
                             "best_of", "use_beam_search", "logit_bias", "prompt_logprobs"};

bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_empty(const json& v) { return (v.is_array() || v.is_object() || v.is_string()) && v.empty(); }
bool is_text_format(const json& v) { return v.is_object() && v.size() == 1 && v.value("type", "") == "text"; }
bool is_none_choice(const json& v) { return v.is_string() && v.get<std::string>() == "none"; }
bool is_text_only(const json& v) { return v == json::array({"text"}); }

struct Refused {
  const char* name;
  std::function<bool(const json&)> inert;  // the value that asks for nothing (null always is)
  const char* why;
};

const std::vector<Refused>& refused_fields() {
  static const std::vector<Refused> table = {
      {"stream", is_false, "a batch job writes each result whole; streaming is not supported, remove it"},
      {"stream_options", is_empty, "streaming is not supported in a batch job"},
      {"tools", is_empty, "tool calling is not implemented"},
      {"tool_choice", is_none_choice, "tool calling is not implemented"},
      {"functions", is_empty, "function calling is not implemented"},
      {"function_call", is_none_choice, "function calling is not implemented"},
      {"response_format", is_text_format, "structured output (response_format) is not implemented"},
      {"guided_json", is_empty, "guided decoding is not implemented"},
      {"guided_regex", is_empty, "guided decoding is not implemented"},
      {"guided_choice", is_empty, "guided decoding is not implemented"},
      {"guided_grammar", is_empty, "guided decoding is not implemented"},
      {"structured_outputs", is_empty, "structured output is not implemented"},
      {"echo", is_false, "echoing the prompt is not implemented"},
      {"suffix", is_empty, "suffix (insertion) is not implemented"},
      {"modalities", is_text_only, "only text output is supported"},
      {"audio", is_empty, "audio output is not supported"},
      {"prediction", is_empty, "predicted outputs are not implemented"},
      {"chat_template", is_empty, "a per-request chat template is not supported; use --chat-template"},
  };
  return table;
}

}  // namespace

std::vector<std::string> check_body_fields(const json& body) {
  std::vector<std::string> ignored;
  for (const auto& [name, value] : body.items()) {
    if (name == "prompt" || name == "messages") continue;
    if (std::find_if(std::begin(kUsed), std::end(kUsed), [&](const char* u) { return name == u; }) != std::end(kUsed))
      continue;
    const auto& table = refused_fields();
    auto it = std::find_if(table.begin(), table.end(), [&](const Refused& r) { return name == r.name; });
    if (it == table.end()) {
      ignored.push_back(name);
      continue;
    }
    if (value.is_null() || it->inert(value)) continue;
    const std::string shown = value.dump();
    CONVEYOR_THROW("request field '", name, "' is not supported: ", it->why, " (got ",
                   shown.size() > 60 ? shown.substr(0, 57) + "..." : shown, ")");
  }
  return ignored;
}

std::string describe_ignored_fields(const std::map<std::string, int64_t>& counts) {
  std::vector<std::string> parts;
  for (const auto& [name, n] : counts)
    parts.push_back(detail::concat(name, " (", n, n == 1 ? " request)" : " requests)"));
  return "ignored request fields (no effect here): " + join(parts, ", ");
}

void check_model_name(const std::string& requested, const std::vector<std::string>& served) {
  if (std::find(served.begin(), served.end(), requested) != served.end()) return;
  std::vector<std::string> quoted;
  for (const std::string& s : served) quoted.push_back("`" + s + "`");
  CONVEYOR_THROW("The model `", requested, "` does not exist. This job serves ", join(quoted, ", "),
                 "; name one of them or leave 'model' out (--served-model-name adds names)");
}

}  // namespace conveyor
