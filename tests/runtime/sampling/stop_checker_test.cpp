// StopChecker: stop strings matched across chunk boundaries with truncation (or inclusion), EOS and
// stop tokens, min_tokens, length limits, and streaming that never hands out text it later cuts
// (checked over random chunkings of random text).
#include "runtime/sampling/stop_checker.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

SamplingParams with_stops(std::vector<std::string> stop, bool include = false) {
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = std::move(stop);
  p.include_stop_str_in_output = include;
  return p;
}

TEST(StopCheckerTest, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_name(FinishReason::kNone), nullptr);
}

TEST(StopCheckerTest, StopStringAcrossChunksIsCutAndHeldBackWhileStreaming) {
  StopChecker c(with_stops({"lo w"}), {2});
  std::string streamed;
  EXPECT_EQ(c.append(10, "Hel"), FinishReason::kNone);
  streamed += c.take_streamable();
  EXPECT_EQ(streamed, "He");  // "l" may begin "lo w"
  EXPECT_EQ(c.append(11, "lo"), FinishReason::kNone);
  streamed += c.take_streamable();
  EXPECT_EQ(streamed, "Hel");  // "lo" may begin "lo w"
  EXPECT_EQ(c.append(12, " wo"), FinishReason::kStop);
  streamed += c.take_streamable();
  EXPECT_EQ(c.text(), "Hel");
  EXPECT_EQ(streamed, "Hel");
  EXPECT_EQ(c.stop_string(), std::optional<std::string>("lo w"));
  EXPECT_FALSE(c.stop_token().has_value());
  EXPECT_EQ(c.num_tokens(), 3);
}

TEST(StopCheckerTest, IncludeStopStringKeepsItAndDropsTheRest) {
  StopChecker c(with_stops({"lo w"}, true), {2});
  c.append(10, "Hel");
  c.append(11, "lo");
  EXPECT_EQ(c.append(12, " world"), FinishReason::kStop);
  EXPECT_EQ(c.text(), "Hello w");
  EXPECT_EQ(c.take_streamable(), "Hello w");
}

TEST(StopCheckerTest, EarliestMatchWinsInOneChunk) {
  StopChecker c(with_stops({"world", "o"}), {});
  EXPECT_EQ(c.append(3, "hello world"), FinishReason::kStop);
  EXPECT_EQ(c.text(), "hell");
  EXPECT_EQ(*c.stop_string(), "o");
}

TEST(StopCheckerTest, EosEndsWithoutItsText) {
  SamplingParams p = with_stops({});
  StopChecker c(p, {2, 9});
  c.append(5, "a b");
  EXPECT_EQ(c.append(9, "</s>"), FinishReason::kStop);
  EXPECT_EQ(c.text(), "a b");
  EXPECT_FALSE(c.stop_token().has_value());  // EOS is not a stop_reason, as in vLLM
  EXPECT_FALSE(c.stop_string().has_value());
  p.include_stop_str_in_output = true;
  StopChecker keep(p, {2, 9});
  keep.append(5, "a b");
  keep.append(2, "</s>");
  EXPECT_EQ(keep.text(), "a b</s>");
}

TEST(StopCheckerTest, IgnoreEosRunsToMaxTokens) {
  SamplingParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  StopChecker c(p, {2});
  EXPECT_EQ(c.append(2, "x"), FinishReason::kNone);
  EXPECT_EQ(c.append(2, "y"), FinishReason::kNone);
  EXPECT_EQ(c.append(2, "z"), FinishReason::kLength);
  EXPECT_EQ(c.text(), "xyz");
}

TEST(StopCheckerTest, StopTokenIdsAreStopReasons) {
  SamplingParams p;
  p.stop_token_ids = {7, 8};
  StopChecker c(p, {2});
  c.append(4, "q");
  EXPECT_EQ(c.append(8, "<|eot|>"), FinishReason::kStop);
  EXPECT_EQ(c.stop_token(), std::optional<int32_t>(8));
  EXPECT_EQ(c.text(), "q");
}

TEST(StopCheckerTest, MaxTokensAndContextLimitGiveLength) {
  SamplingParams p;
  p.max_tokens = 3;
  StopChecker c(p, {2});
  c.append(4, "a");
  c.append(4, "b");
  EXPECT_EQ(c.append(4, "c"), FinishReason::kLength);
  EXPECT_STREQ(finish_reason_name(c.reason()), "length");
  EXPECT_THROW(c.append(4, "d"), Error);  // appending after the finish is a caller bug

  p.max_tokens = 100;
  StopChecker ctx(p, {2}, /*prompt_len=*/5, /*max_model_len=*/8);
  EXPECT_EQ(ctx.append(4, "a"), FinishReason::kNone);
  EXPECT_EQ(ctx.append(4, "b"), FinishReason::kNone);
  EXPECT_EQ(ctx.append(4, "c"), FinishReason::kLength);
  EXPECT_THROW(StopChecker(p, {2}, 8, 8), Error);
}

TEST(StopCheckerTest, MinTokensSuppressesEveryStopButLength) {
  SamplingParams p = with_stops({"!"});
  p.min_tokens = 3;
  p.stop_token_ids = {7};
  StopChecker c(p, {2});
  EXPECT_EQ(c.append(2, ""), FinishReason::kNone);   // output 1 < 3: EOS ignored
  EXPECT_EQ(c.append(7, "!"), FinishReason::kNone);  // output 2 < 3: stop token and string ignored
  EXPECT_EQ(c.append(4, "a!"), FinishReason::kStop); // output 3: checks apply to the new text
  EXPECT_EQ(c.text(), "!a");
}

TEST(StopCheckerTest, StreamingNeverSplitsUtf8) {
  StopChecker c(with_stops({"ab"}), {});
  c.append(1, "caf\xC3\xA9");  // "café"
  EXPECT_EQ(c.take_streamable(), "caf\xC3\xA9");
  c.append(2, "\xE2\x82\xAC" "a");  // "€a": "a" is held back
  EXPECT_EQ(c.take_streamable(), "\xE2\x82\xAC");
  EXPECT_EQ(c.append(3, "b"), FinishReason::kStop);
  EXPECT_EQ(c.take_streamable(), "");
  EXPECT_EQ(c.text(), "caf\xC3\xA9\xE2\x82\xAC");
}

// One stop string, random text over a small alphabet and random chunkings: the final text is the
// prefix before (or through) the first occurrence, and the streamed pieces concatenate to it.
TEST(StopCheckerTest, RandomChunkingsAgreeWithWholeTextSearch) {
  std::mt19937 rng(2024);
  const std::string alphabet = "abc ";
  int stopped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string stop;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i) stop += alphabet[rng() % alphabet.size()];
    std::string whole;
    for (int i = 0; i < 40; ++i) whole += alphabet[rng() % alphabet.size()];
    bool include = rng() % 2;
    SamplingParams p = with_stops({stop}, include);
    StopChecker c(p, {});
    std::string streamed;
    size_t at = 0;
    while (at < whole.size() && !c.finished()) {
      size_t len = std::min(whole.size() - at, static_cast<size_t>(rng() % 5));  // empty chunks too
      c.append(1, whole.substr(at, len));
      at += len;
      streamed += c.take_streamable();
    }
    size_t pos = whole.find(stop);
    std::string want = pos == std::string::npos ? whole.substr(0, at) : whole.substr(0, pos + (include ? stop.size() : 0));
    SCOPED_TRACE("stop '" + stop + "' in '" + whole + "'");
    EXPECT_EQ(c.finished(), pos != std::string::npos);
    EXPECT_EQ(c.text(), want);
    if (!c.finished()) {
      // Not finished: the held-back tail is at most a proper prefix of the stop string.
      EXPECT_LT(c.text().size() - streamed.size(), stop.size());
      EXPECT_EQ(c.text().compare(0, streamed.size(), streamed), 0);
    } else {
      ++stopped;
      EXPECT_EQ(streamed, want);
    }
  }
  EXPECT_GT(stopped, 100);  // both outcomes are exercised
  EXPECT_LT(stopped, 390);
}

}  // namespace
}  // namespace conveyor
