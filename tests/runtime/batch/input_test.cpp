// Tests of batch input parsing: both line forms, every kind of invalid line with its reason and line
// number, duplicate custom_ids, strict mode, and token-id prompts checked element by element.
#include "runtime/batch/input.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

BatchInput parse(const std::string& text, bool strict = false) {
  std::istringstream in(text);
  BatchInputOptions o;
  o.strict = strict;
  o.origin = "req.jsonl";
  return parse_batch_input(in, o);
}

std::string openai(const std::string& id, const std::string& url, const json& body) {
  return json{{"custom_id", id}, {"method", "POST"}, {"url", url}, {"body", body}}.dump();
}

TEST(BatchInput, ReadsOpenAiAndPlainLines) {
  std::string text = openai("a", "/v1/completions", {{"model", "m"}, {"prompt", "Hi"}, {"max_tokens", 7}}) + "\n" +
                     "\n   \n" +
                     openai("b", "/v1/chat/completions",
                            {{"messages", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}}},
                             {"temperature", 0.5}}) +
                     "\n" + R"({"prompt": "plain", "top_k": 3})" + "\r\n" +
                     R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]})";
  BatchInput in = parse(text);
  ASSERT_TRUE(in.errors.empty()) << in.errors[0].reason;
  EXPECT_EQ(in.lines, 6);
  ASSERT_EQ(in.requests.size(), 4u);
  const auto& a = in.requests[0];
  EXPECT_EQ(a.custom_id, "a");
  EXPECT_EQ(a.line, 1);
  EXPECT_EQ(a.endpoint, Endpoint::kCompletions);
  EXPECT_EQ(a.model, "m");
  EXPECT_EQ(a.prompt_text, "Hi");
  EXPECT_EQ(a.sampling.max_tokens, 7);
  const auto& b = in.requests[1];
  EXPECT_EQ(b.custom_id, "b");
  EXPECT_EQ(b.line, 4);
  EXPECT_EQ(b.endpoint, Endpoint::kChatCompletions);
  ASSERT_EQ(b.messages.size(), 2u);
  EXPECT_EQ(b.messages[0].role, "system");
  EXPECT_EQ(b.messages[1].content, "U");
  EXPECT_DOUBLE_EQ(b.sampling.temperature, 0.5);
  EXPECT_EQ(in.requests[2].custom_id, "line-5");
  EXPECT_EQ(in.requests[2].prompt_text, "plain");
  EXPECT_EQ(in.requests[2].sampling.top_k, 3);
  EXPECT_EQ(in.requests[3].custom_id, "line-6");
  EXPECT_EQ(in.requests[3].messages[0].content, "xy");
}

TEST(BatchInput, TokenIdPromptKeepsEveryId) {
  std::mt19937 rng(7);
  std::vector<int32_t> ids(300);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 128000);
  BatchInput in = parse(openai("t", "/v1/completions", {{"prompt", ids}}));
  ASSERT_EQ(in.requests.size(), 1u);
  ASSERT_TRUE(in.requests[0].prompt_is_ids());
  ASSERT_EQ(in.requests[0].prompt_ids.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(in.requests[0].prompt_ids[i], ids[i]) << "index " << i;
}

TEST(BatchInput, EachInvalidLineGetsItsReason) {
  std::vector<std::string> lines = {
      "{not json",                                                                       // 1
      json{{"url", "/v1/completions"}, {"body", {{"prompt", "x"}}}}.dump(),             // 2 no custom_id
      openai("u", "/v1/completion", {{"prompt", "x"}}),                                  // 3 unknown url
      openai("t", "/v1/completions", {{"prompt", "x"}, {"temperature", -1}}),            // 4
      openai("e", "/v1/completions", {{"prompt", ""}}),                                  // 5
      openai("l", "/v1/completions", {{"prompt", {"a", "b"}}}),                          // 6
      openai("r", "/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}),  // 7
      json{{"custom_id", "g"}, {"method", "GET"}, {"url", "/v1/completions"}, {"body", {{"prompt", "x"}}}}.dump(),
      R"({"prompt": "x", "messages": []})",                                              // 9
      "[1, 2]",                                                                          // 10
      openai("n", "/v1/completions", {{"prompt", {1, -2}}}),                             // 11
      openai("ok", "/v1/completions", {{"prompt", "fine"}}),                             // 12
  };
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  BatchInput in = parse(text);
  ASSERT_EQ(in.requests.size(), 1u);
  EXPECT_EQ(in.requests[0].custom_id, "ok");
  std::vector<std::pair<int64_t, std::string>> want = {
      {1, "malformed JSON"},          {2, "without 'custom_id'"},     {3, "did you mean '/v1/completions'"},
      {4, "temperature"},             {5, "'prompt' is empty"},       {6, "several prompts"},
      {7, "role 'robot'"},            {8, "'method' must be \"POST\""}, {9, "both 'prompt' and 'messages'"},
      {10, "must be a JSON object"},  {11, "element 1"},
  };
  ASSERT_EQ(in.errors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(in.errors[i].line, want[i].first);
    EXPECT_NE(in.errors[i].reason.find(want[i].second), std::string::npos)
        << "line " << want[i].first << ": " << in.errors[i].reason;
  }
  EXPECT_FALSE(in.errors[0].custom_id.has_value());
  EXPECT_EQ(*in.errors[3].custom_id, "t");
}

// A line with invalid UTF-8 fails, but keeps its custom_id when the id itself is readable.
TEST(BatchInput, InvalidUtf8LineKeepsItsReadableCustomId) {
  const std::string bad_prompt = openai("u8", "/v1/completions", {{"prompt", "caf__"}});
  std::string line1 = bad_prompt;
  line1.replace(line1.find("__"), 2, "\xC3\x28");
  std::string line2 = openai("id__", "/v1/completions", {{"prompt", "x"}});
  line2.replace(line2.find("__"), 2, "\xFF\xFE");
  BatchInput in = parse(line1 + "\n" + line2 + "\n");
  ASSERT_EQ(in.errors.size(), 2u);
  ASSERT_TRUE(in.errors[0].custom_id.has_value());
  EXPECT_EQ(*in.errors[0].custom_id, "u8");
  EXPECT_NE(in.errors[0].reason.find("not valid UTF-8 (byte 0xc3 at column"), std::string::npos) << in.errors[0].reason;
  EXPECT_FALSE(in.errors[1].custom_id.has_value());  // the id holds the bad bytes: not recovered
}

// Fields that change nothing here are counted per request for the summary; refused ones fail the line.
TEST(BatchInput, IgnoredAndRefusedFields) {
  BatchInput in = parse(openai("a", "/v1/completions", {{"prompt", "x"}, {"user", "u"}, {"metadata", {{"k", 1}}}}) +
                        "\n" + openai("b", "/v1/chat/completions",
                                       {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"user", "u"}}) +
                        "\n" + openai("c", "/v1/completions", {{"prompt", "x"}, {"stream", true}}) + "\n" +
                        R"({"prompt": "p", "n": 2})" "\n");
  EXPECT_EQ(in.requests.size(), 2u);
  EXPECT_EQ(in.ignored_fields, (std::map<std::string, int64_t>{{"metadata", 1}, {"user", 2}}));
  ASSERT_EQ(in.errors.size(), 2u);
  EXPECT_EQ(*in.errors[0].custom_id, "c");
  EXPECT_NE(in.errors[0].reason.find("'stream' is not supported"), std::string::npos) << in.errors[0].reason;
  EXPECT_NE(in.errors[1].reason.find("n must be 1"), std::string::npos) << in.errors[1].reason;
}

TEST(BatchInput, DuplicateCustomIdsAreAllErrors) {
  std::string text = openai("d", "/v1/completions", {{"prompt", "1"}}) + "\n" +
                     openai("x", "/v1/completions", {{"prompt", "2"}}) + "\n" +
                     openai("d", "/v1/completions", {{"prompt", "3"}}) + "\n" +
                     openai("d", "/v1/completions", {{"prompt", ""}}) + "\n";
  BatchInput in = parse(text);
  ASSERT_EQ(in.requests.size(), 1u);
  EXPECT_EQ(in.requests[0].custom_id, "x");
  ASSERT_EQ(in.errors.size(), 3u);
  EXPECT_EQ(in.errors[0].line, 1);
  EXPECT_NE(in.errors[0].reason.find("duplicate custom_id 'd' on lines 1, 3, 4"), std::string::npos)
      << in.errors[0].reason;
  EXPECT_EQ(in.errors[1].line, 3);
  EXPECT_EQ(in.errors[2].line, 4);
  EXPECT_NE(in.errors[2].reason.find("'prompt' is empty"), std::string::npos);
}

TEST(BatchInput, StrictModeThrowsListingFirstErrors) {
  std::string text;
  for (int i = 0; i < 8; ++i) text += "{bad\n";
  text += R"({"prompt": "ok"})" "\n";
  try {
    parse(text, /*strict=*/true);
    FAIL() << "strict mode accepted invalid lines";
  } catch (const Error& e) {
    std::string m = e.message();
    EXPECT_NE(m.find("8 invalid line(s) in req.jsonl"), std::string::npos) << m;
    EXPECT_NE(m.find("req.jsonl:5: malformed JSON"), std::string::npos) << m;
    EXPECT_EQ(m.find("req.jsonl:6:"), std::string::npos) << m;
  }
  EXPECT_EQ(parse(R"({"prompt": "ok"})", true).requests.size(), 1u);
}

TEST(BatchInput, ReadsFileAndNamesMissingOne) {
  std::string dir = testing::temp_dir("batch_input_file");
  std::string path = dir + "/in.jsonl";
  std::ofstream(path) << R"({"prompt": "a"})" << "\n" << R"({"prompt": "b"})" << "\n";
  BatchInput in = read_batch_input(path, {});
  ASSERT_EQ(in.requests.size(), 2u);
  EXPECT_EQ(in.requests[1].custom_id, "line-2");
  try {
    read_batch_input(dir + "/missing.jsonl", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.jsonl"), std::string::npos);
  }
  try {
    read_batch_input(dir, {});
    FAIL() << "a directory was read as an empty input";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("is a directory"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
