// SamplingParams: every out-of-range value is rejected with a message naming the parameter, the
// value and the allowed range; request bodies (completions and chat) and config defaults are read
// with type errors that name the field.
#include "runtime/sampling/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/config/config.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using nlohmann::json;

// The message of the conveyor::Error thrown by f, or "" when nothing is thrown.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

struct InvalidCase {
  const char* name;
  std::function<void(SamplingParams&)> set;
  const char* parameter;
  const char* message;  // the full vLLM-style sentence
};

TEST(SamplingParamsTest, EveryInvalidValueIsRejectedByName) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<InvalidCase> cases = {
      {"n=2", [](SamplingParams& p) { p.n = 2; }, "n", "n must be 1 (parallel sampling is not supported yet), got 2"},
      {"n=0", [](SamplingParams& p) { p.n = 0; }, "n", "n must be 1 (parallel sampling is not supported yet), got 0"},
      {"temperature<0", [](SamplingParams& p) { p.temperature = -0.5; }, "temperature",
       "temperature must be non-negative and finite, got -0.5"},
      {"temperature nan", [&](SamplingParams& p) { p.temperature = nan; }, "temperature",
       "temperature must be non-negative and finite, got nan"},
      {"temperature inf", [&](SamplingParams& p) { p.temperature = inf; }, "temperature",
       "temperature must be non-negative and finite, got inf"},
      {"top_p=0", [](SamplingParams& p) { p.top_p = 0.0; }, "top_p", "top_p must be in (0, 1], got 0"},
      {"top_p>1", [](SamplingParams& p) { p.top_p = 1.5; }, "top_p", "top_p must be in (0, 1], got 1.5"},
      {"top_p nan", [&](SamplingParams& p) { p.top_p = nan; }, "top_p", "top_p must be in (0, 1], got nan"},
      {"top_k=-2", [](SamplingParams& p) { p.top_k = -2; }, "top_k",
       "top_k must be 0 or -1 (disable), or at least 1, got -2"},
      {"min_p<0", [](SamplingParams& p) { p.min_p = -0.1; }, "min_p", "min_p must be in [0, 1], got -0.1"},
      {"min_p>1", [](SamplingParams& p) { p.min_p = 1.25; }, "min_p", "min_p must be in [0, 1], got 1.25"},
      {"repetition_penalty=0", [](SamplingParams& p) { p.repetition_penalty = 0.0; }, "repetition_penalty",
       "repetition_penalty must be greater than zero and finite, got 0"},
      {"repetition_penalty<0", [](SamplingParams& p) { p.repetition_penalty = -1.0; }, "repetition_penalty",
       "repetition_penalty must be greater than zero and finite, got -1"},
      {"repetition_penalty inf", [&](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty",
       "repetition_penalty must be greater than zero and finite, got inf"},
      {"presence_penalty>2", [](SamplingParams& p) { p.presence_penalty = 2.5; }, "presence_penalty",
       "presence_penalty must be in [-2, 2], got 2.5"},
      {"presence_penalty<-2", [](SamplingParams& p) { p.presence_penalty = -2.01; }, "presence_penalty",
       "presence_penalty must be in [-2, 2], got -2.01"},
      {"frequency_penalty<-2", [](SamplingParams& p) { p.frequency_penalty = -3.0; }, "frequency_penalty",
       "frequency_penalty must be in [-2, 2], got -3"},
      {"frequency_penalty nan", [&](SamplingParams& p) { p.frequency_penalty = nan; }, "frequency_penalty",
       "frequency_penalty must be in [-2, 2], got nan"},
      {"max_tokens<0", [](SamplingParams& p) { p.max_tokens = -1; }, "max_tokens",
       "max_tokens must be at least 1 (or 0: no limit), got -1"},
      {"min_tokens<0", [](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens",
       "min_tokens must be greater than or equal to 0, got -1"},
      {"min_tokens>max_tokens", [](SamplingParams& p) { p.max_tokens = 16; p.min_tokens = 17; }, "min_tokens",
       "min_tokens must be less than or equal to max_tokens=16, got 17"},
      {"stop empty", [](SamplingParams& p) { p.stop = {"a", ""}; }, "stop",
       "stop cannot contain an empty string (index 1)"},
      {"stop_token_ids<0", [](SamplingParams& p) { p.stop_token_ids = {4, -3}; }, "stop_token_ids",
       "stop_token_ids must be non-negative, got -3 at index 1"},
      {"logprobs<0", [](SamplingParams& p) { p.logprobs = -1; }, "logprobs", "logprobs must be in [0, 20], got -1"},
      {"logprobs>20", [](SamplingParams& p) { p.logprobs = 21; }, "logprobs", "logprobs must be in [0, 20], got 21"},
  };
  for (const InvalidCase& c : cases) {
    SCOPED_TRACE(c.name);
    SamplingParams p;
    c.set(p);
    auto v = p.first_violation();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->parameter, c.parameter);
    EXPECT_EQ(v->message, c.message);
    EXPECT_EQ(error_of([&] { p.validate(); }), std::string("invalid sampling parameter: ") + c.message);
  }
}

TEST(SamplingParamsTest, BoundaryValuesAreAccepted) {
  std::vector<std::function<void(SamplingParams&)>> ok = {
      [](SamplingParams& p) { p.temperature = 0.0; },
      [](SamplingParams& p) { p.temperature = 1e4; },
      [](SamplingParams& p) { p.top_p = 1.0; },
      [](SamplingParams& p) { p.top_p = 1e-9; },
      [](SamplingParams& p) { p.top_k = -1; },
      [](SamplingParams& p) { p.top_k = 1; },
      [](SamplingParams& p) { p.min_p = 0.0; },
      [](SamplingParams& p) { p.min_p = 1.0; },
      [](SamplingParams& p) { p.presence_penalty = -2.0, p.frequency_penalty = 2.0; },
      [](SamplingParams& p) { p.repetition_penalty = 1e-3; },
      [](SamplingParams& p) { p.min_tokens = p.max_tokens = 1; },
      [](SamplingParams& p) { p.logprobs = 0; },
      [](SamplingParams& p) { p.logprobs = 20; },
      [](SamplingParams& p) { p.stop = {"\n\n", "###"}, p.stop_token_ids = {0, 128009}; },
  };
  for (size_t i = 0; i < ok.size(); ++i) {
    SCOPED_TRACE(i);
    SamplingParams p;
    ok[i](p);
    EXPECT_FALSE(p.first_violation().has_value()) << p.first_violation()->message;
  }
}

TEST(SamplingParamsTest, GreedyBelowVllmEpsilon) {
  SamplingParams p;
  p.temperature = 0.0;
  EXPECT_TRUE(p.greedy());
  p.temperature = 0.9e-5;
  EXPECT_TRUE(p.greedy());
  p.temperature = 1e-5;
  EXPECT_FALSE(p.greedy());
}

TEST(SamplingParamsTest, FromJsonReadsEveryField) {
  SamplingParams defaults;
  defaults.max_tokens = 64;
  json body = json::parse(R"({
    "model": "x", "prompt": "hi", "n": 1, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "seed": -12345678901, "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": -0.25,
    "max_tokens": 100, "min_tokens": 3, "stop": ["\n", "END"], "stop_token_ids": [7, 128009],
    "ignore_eos": true, "include_stop_str_in_output": true, "skip_special_tokens": false, "logprobs": 5})");
  SamplingParams p = SamplingParams::from_json(body, defaults);
  EXPECT_EQ(p.n, 1);
  EXPECT_DOUBLE_EQ(p.temperature, 0.7);
  EXPECT_DOUBLE_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_DOUBLE_EQ(p.min_p, 0.05);
  ASSERT_TRUE(p.seed.has_value());
  EXPECT_EQ(*p.seed, -12345678901ll);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.1);
  EXPECT_DOUBLE_EQ(p.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(p.frequency_penalty, -0.25);
  EXPECT_EQ(p.max_tokens, 100);
  EXPECT_EQ(p.min_tokens, 3);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 128009}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_FALSE(p.skip_special_tokens);
  ASSERT_TRUE(p.logprobs.has_value());
  EXPECT_EQ(*p.logprobs, 5);
}

TEST(SamplingParamsTest, FromJsonKeepsDefaultsForAbsentAndNull) {
  SamplingParams defaults;
  defaults.temperature = 0.25;
  defaults.max_tokens = 77;
  defaults.stop = {"x"};
  SamplingParams p = SamplingParams::from_json(
      json::parse(R"({"prompt": [1, 2], "temperature": null, "stop": null, "seed": null, "logprobs": null})"),
      defaults);
  EXPECT_DOUBLE_EQ(p.temperature, 0.25);
  EXPECT_EQ(p.max_tokens, 77);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_FALSE(p.logprobs.has_value());
}

TEST(SamplingParamsTest, FromJsonStopStringAndChatLogprobs) {
  SamplingParams d;
  EXPECT_EQ(SamplingParams::from_json(json{{"stop", "###"}}, d).stop, std::vector<std::string>{"###"});
  EXPECT_EQ(*SamplingParams::from_json(json{{"logprobs", true}, {"top_logprobs", 4}}, d).logprobs, 4);
  EXPECT_EQ(*SamplingParams::from_json(json{{"logprobs", true}}, d).logprobs, 0);
  EXPECT_FALSE(SamplingParams::from_json(json{{"logprobs", false}}, d).logprobs.has_value());
  EXPECT_EQ(SamplingParams::from_json(json{{"max_tokens", 5}, {"max_completion_tokens", 9}}, d).max_tokens, 9);
  EXPECT_EQ(SamplingParams::from_json(json{{"top_k", 5.0}}, d).top_k, 5);  // integral floats are integers
  // Neutral values of unsupported fields are fine (clients send them by default).
  SamplingParams::from_json(json::parse(R"({"best_of": 1, "use_beam_search": false, "logit_bias": {}})"), d);
}

TEST(SamplingParamsTest, FromJsonTypeErrorsNameTheField) {
  SamplingParams d;
  struct Case {
    const char* body;
    const char* want;
  };
  const std::vector<Case> cases = {
      {R"({"temperature": "hot"})", "request field 'temperature' must be a number, got string \"hot\""},
      {R"({"top_p": true})", "request field 'top_p' must be a number, got boolean true"},
      {R"({"top_k": 2.5})", "request field 'top_k' must be an integer, got number 2.5"},
      {R"({"max_tokens": "10"})", "request field 'max_tokens' must be an integer, got string \"10\""},
      {R"({"seed": 18446744073709551615})", "request field 'seed' must be an integer that fits in 64 bits"},
      {R"({"stop": 5})", "request field 'stop' must be a string or a list of strings, got number 5"},
      {R"({"stop": ["a", 1]})", "request field 'stop' must be a string or a list of strings (an element is not)"},
      {R"({"stop_token_ids": 3})", "request field 'stop_token_ids' must be a list of integers, got number 3"},
      {R"({"stop_token_ids": [3, -1]})", "stop_token_ids must be non-negative token ids, got -1 at index 1"},
      {R"({"ignore_eos": "yes"})", "request field 'ignore_eos' must be true or false, got string \"yes\""},
      {R"({"logprobs": "3"})", "request field 'logprobs' must be an integer, got string \"3\""},
      {R"({"top_logprobs": 3})", "request field 'top_logprobs' needs \"logprobs\": true"},
      {R"({"logprobs": false, "top_logprobs": 3})", "request field 'top_logprobs' needs \"logprobs\": true"},
      {R"([1, 2])", "request body must be a JSON object, got array [1,2]"},
      // Fields that would change sampling but are not implemented are refused, not ignored.
      {R"({"best_of": 3})", "request field 'best_of' must be 1 (parallel sampling is not supported yet)"},
      {R"({"use_beam_search": true})", "request field 'use_beam_search' is not supported"},
      {R"({"logit_bias": {"50256": -100}})", "request field 'logit_bias' is not supported yet"},
      // Range errors after parsing use the same sentences as validate().
      {R"({"temperature": -1})", "temperature must be non-negative and finite, got -1"},
      {R"({"n": 4})", "n must be 1 (parallel sampling is not supported yet), got 4"},
      {R"({"logprobs": true, "top_logprobs": 25})", "logprobs must be in [0, 20], got 25"},
      {R"({"stop": ""})", "stop cannot contain an empty string (index 0)"},
      {R"({"max_tokens": 4, "min_tokens": 5})", "min_tokens must be less than or equal to max_tokens=4, got 5"},
      // 0 is "no limit" only as the default; a request naming a limit names a real one (as vLLM).
      {R"({"max_tokens": 0})", "request field 'max_tokens' must be at least 1, got 0"},
      {R"({"max_completion_tokens": -3})", "request field 'max_completion_tokens' must be at least 1, got -3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    std::string msg = error_of([&] { SamplingParams::from_json(json::parse(c.body), d); });
    EXPECT_NE(msg.find(c.want), std::string::npos) << "got: " << msg;
  }
}

TEST(SamplingParamsTest, FromConfigReadsSamplingKeys) {
  Config config;
  SamplingParams defaults = SamplingParams::from_config(config);
  EXPECT_DOUBLE_EQ(defaults.temperature, 1.0);
  EXPECT_EQ(defaults.max_tokens, 0);  // no limit, as vLLM: EOS, a stop or the context ends the output
  config.set("sampling.temperature", "0.3", "--temperature");
  config.set("sampling.top_p", "0.8", "--top-p");
  config.set("sampling.top_k", "12", "--top-k");
  config.set("sampling.min_p", "0.1", "--min-p");
  config.set("sampling.max_tokens", "50", "--max-tokens");
  config.set("sampling.min_tokens", "4", "--min-tokens");
  config.set("sampling.repetition_penalty", "1.2", "--set");
  config.set("sampling.presence_penalty", "-0.5", "--set");
  config.set("sampling.frequency_penalty", "0.75", "--set");
  config.set("sampling.ignore_eos", "true", "--ignore-eos");
  SamplingParams p = SamplingParams::from_config(config);
  EXPECT_DOUBLE_EQ(p.temperature, 0.3);
  EXPECT_DOUBLE_EQ(p.top_p, 0.8);
  EXPECT_EQ(p.top_k, 12);
  EXPECT_DOUBLE_EQ(p.min_p, 0.1);
  EXPECT_EQ(p.max_tokens, 50);
  EXPECT_EQ(p.min_tokens, 4);
  EXPECT_DOUBLE_EQ(p.repetition_penalty, 1.2);
  EXPECT_DOUBLE_EQ(p.presence_penalty, -0.5);
  EXPECT_DOUBLE_EQ(p.frequency_penalty, 0.75);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(p.seed.has_value());
}

TEST(SamplingParamsTest, FromConfigNamesKeyAndOrigin) {
  Config config;
  config.set("sampling.max_tokens", "8", "run.yaml:4");
  config.set("sampling.min_tokens", "9", "--min-tokens");
  std::string msg = error_of([&] { SamplingParams::from_config(config); });
  EXPECT_NE(msg.find("config key 'sampling.min_tokens' (set by --min-tokens): min_tokens must be less than or "
                     "equal to max_tokens=8, got 9"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace conveyor
