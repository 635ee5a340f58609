// Request-body fields: what the engine does not implement fails the line naming the field; inert
// values of those fields (stream: false, tools: []) pass; harmless or unknown fields are returned as
// ignored, so the run summary lists them; a request's model must be one the job serves.
#include "runtime/batch/request_fields.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

using nlohmann::json;

std::string refusal(const json& body) {
  try {
    check_body_fields(body);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(RequestFields, UnimplementedFieldsFailNamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"stream", true}}, "'stream' is not supported"},
      {{{"tools", json::array({{{"type", "function"}}})}}, "'tools' is not supported: tool calling"},
      {{{"tool_choice", "auto"}}, "'tool_choice' is not supported"},
      {{{"response_format", {{"type", "json_object"}}}}, "'response_format' is not supported: structured output"},
      {{{"echo", true}}, "'echo' is not supported"},
      {{{"suffix", "tail"}}, "'suffix' is not supported"},
      {{{"guided_json", {{"type", "object"}}}}, "'guided_json' is not supported"},
      {{{"stream_options", {{"include_usage", true}}}}, "'stream_options' is not supported"},
  };
  for (const auto& [body, want] : cases) {
    SCOPED_TRACE(body.dump());
    json b = body;
    b["prompt"] = "x";
    EXPECT_NE(refusal(b).find(want), std::string::npos) << refusal(b);
  }
}

TEST(RequestFields, InertValuesPassAndHarmlessFieldsAreIgnored) {
  const json body = {{"prompt", "x"},       {"stream", false},  {"tools", json::array()}, {"tool_choice", "none"},
                     {"response_format", {{"type", "text"}}}, {"echo", false}, {"stream_options", nullptr},
                     {"user", "u1"},        {"metadata", {{"k", "v"}}}, {"max_tokens", 5}, {"temperature", 0},
                     {"x_custom", 1}};
  EXPECT_EQ(check_body_fields(body), (std::vector<std::string>{"metadata", "user", "x_custom"}));
  EXPECT_EQ(describe_ignored_fields({{"metadata", 2}, {"user", 1}}),
            "ignored request fields (no effect here): metadata (2 requests), user (1 request)");
}

TEST(RequestFields, ModelNamesMustBeServed) {
  EXPECT_NO_THROW(check_model_name("smol", {"/m/smol.gguf", "smol"}));
  try {
    check_model_name("gpt-9", {"/m/smol.gguf", "smol.gguf"});
    ADD_FAILURE() << "an unknown model was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.message().rfind("The model `gpt-9` does not exist.", 0), 0u) << e.message();
    EXPECT_NE(e.message().find("`smol.gguf`"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
