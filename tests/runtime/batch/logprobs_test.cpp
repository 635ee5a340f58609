// OpenAI logprobs shapes for random outputs: completions (tokens, token_logprobs, top_logprobs,
// text_offset as byte offsets) and chat (content with bytes), with a real tokenizer and without one.
#include "runtime/batch/logprobs.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/utf8.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

CompletionOutput random_output(std::mt19937& rng, int32_t vocab, size_t n) {
  CompletionOutput out;
  std::uniform_real_distribution<float> lp(-8.f, 0.f);
  for (size_t i = 0; i < n; ++i) {
    TokenLogprobs t{static_cast<int32_t>(rng() % vocab), lp(rng), static_cast<int64_t>(rng() % 5), {}};
    for (int k = 0; k < 3; ++k) t.top.push_back({static_cast<int32_t>(rng() % vocab), lp(rng)});
    out.logprobs.push_back(t);
  }
  return out;
}

std::vector<int> bytes_of(const std::string& s) {
  std::vector<int> b;
  for (unsigned char c : s) b.push_back(c);
  return b;
}

TEST(OpenaiLogprobs, NullWithoutLogprobs) {
  EXPECT_TRUE(openai_logprobs(CompletionOutput{}, Endpoint::kCompletions, nullptr).is_null());
  EXPECT_TRUE(openai_logprobs(CompletionOutput{}, Endpoint::kChatCompletions, nullptr).is_null());
}

TEST(OpenaiLogprobs, CompletionsShapeWithARealTokenizer) {
  const Tokenizer tok = Tokenizer::from_json_file(testing::data_path("tokenizer/sp_bpe.json"));
  std::mt19937 rng(21);
  const CompletionOutput out = random_output(rng, tok.vocab_size(), 40);
  const json j = openai_logprobs(out, Endpoint::kCompletions, &tok);
  ASSERT_EQ(j["tokens"].size(), out.logprobs.size());
  int64_t offset = 0;
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    const TokenLogprobs& lp = out.logprobs[i];
    const std::string text = tok.decode({lp.token}, false);
    EXPECT_EQ(j["tokens"][i], utf8_lossy(text)) << i;
    EXPECT_EQ(j["token_logprobs"][i].get<float>(), lp.logprob) << i;
    EXPECT_EQ(j["text_offset"][i], offset) << i;
    offset += static_cast<int64_t>(text.size());
    json top = json::object();  // alternatives with the same text: the later one stays, as in the output
    for (const TokenLogprob& a : lp.top) top[utf8_lossy(tok.decode({a.token}, false))] = a.logprob;
    EXPECT_EQ(j["top_logprobs"][i], top) << i;
  }
  EXPECT_NO_THROW(j.dump());
}

TEST(OpenaiLogprobs, ChatShapeNamesTokensByIdWithoutATokenizer) {
  std::mt19937 rng(22);
  const CompletionOutput out = random_output(rng, 1000, 25);
  const json j = openai_logprobs(out, Endpoint::kChatCompletions, nullptr);
  ASSERT_EQ(j["content"].size(), out.logprobs.size());
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    const TokenLogprobs& lp = out.logprobs[i];
    const json& c = j["content"][i];
    const std::string name = std::to_string(lp.token);
    EXPECT_EQ(c["token"], name) << i;
    EXPECT_EQ(c["logprob"].get<float>(), lp.logprob) << i;
    EXPECT_EQ(c["bytes"].get<std::vector<int>>(), bytes_of(name)) << i;
    ASSERT_EQ(c["top_logprobs"].size(), lp.top.size()) << i;
    for (size_t k = 0; k < lp.top.size(); ++k) {
      EXPECT_EQ(c["top_logprobs"][k]["token"], std::to_string(lp.top[k].token)) << i;
      EXPECT_EQ(c["top_logprobs"][k]["logprob"].get<float>(), lp.top[k].logprob) << i;
    }
  }
}

// Chat with the real byte-level tokenizer: each token's string is its decoded text and "bytes" its
// bytes, for random ids across the vocabulary (multi-byte pieces included).
TEST(OpenaiLogprobs, ChatTokensCarryTheirTextAndBytes) {
  const Tokenizer tok = Tokenizer::from_json_file(testing::cached_file("smollm2_tokenizer.json"));
  std::mt19937 rng(23);
  const CompletionOutput out = random_output(rng, tok.vocab_size(), 200);
  const json j = openai_logprobs(out, Endpoint::kChatCompletions, &tok);
  ASSERT_EQ(j["content"].size(), out.logprobs.size());
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    const std::string text = tok.decode({out.logprobs[i].token}, false);
    EXPECT_EQ(j["content"][i]["token"], utf8_lossy(text)) << i;
    EXPECT_EQ(j["content"][i]["bytes"].get<std::vector<int>>(), bytes_of(text)) << i;
    const TokenLogprob& a = out.logprobs[i].top.back();
    EXPECT_EQ(j["content"][i]["top_logprobs"][2]["bytes"].get<std::vector<int>>(),
              bytes_of(tok.decode({a.token}, false))) << i;
  }
  EXPECT_NO_THROW(j.dump());
}

}  // namespace
}  // namespace conveyor
