// Engine tests on the fake paged runner with a real tokenizer (tests/data/tokenizer/sp_bpe.json):
// stop strings, max_tokens, min_tokens, seeded sampling reproducible across batch compositions and
// preemption, streamed text equal to the final text, logprobs, request validation and failed outputs.
#include "runtime/engine/engine.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/config/config.h"
#include "stages/local_model_runner.h"
#include "stages/stage_options.h"
#include "tests/runtime/engine/fake_model_runner.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::FakeModelRunner;
constexpr int32_t kEos = 2;

struct Built {
  std::unique_ptr<Engine> engine;
  FakeModelRunner* runner;
};

Built make_engine(int num_blocks = 256, int block_size = 16, bool with_tokenizer = true, int64_t max_seqs = 8,
                  int64_t max_model_len = 0) {
  auto tok = std::make_unique<Tokenizer>(Tokenizer::from_json_file(testing::data_path("tokenizer/sp_bpe.json")));
  tok->set_bos_eos(1, {kEos});
  auto runner = std::make_unique<FakeModelRunner>(tok->vocab_size(), num_blocks, block_size, std::vector<int64_t>{kEos});
  FakeModelRunner* raw = runner.get();
  EngineOptions opts;
  opts.scheduler.max_num_seqs = max_seqs;
  opts.scheduler.max_num_batched_tokens = 64;
  opts.seed = 7;
  opts.max_model_len = max_model_len;
  if (!with_tokenizer) tok.reset();
  return {std::make_unique<Engine>(std::move(runner), std::move(tok), opts), raw};
}

Request make_request(int64_t id, std::vector<int32_t> prompt, SamplingParams p) {
  Request r;
  r.id = id;
  r.index = static_cast<uint64_t>(id);
  r.prompt_ids = std::move(prompt);
  r.params = p;
  return r;
}

std::vector<int32_t> random_prompt(uint64_t seed, int len) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < len; ++i) ids.push_back(static_cast<int32_t>(3 + rng() % 1600));
  return ids;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

CompletionOutput run_one(Engine& e, Request r) { return e.generate({std::move(r)}).at(0); }

TEST(Engine, MaxTokensEndsWithLength) {
  Built b = make_engine();
  CompletionOutput out = run_one(*b.engine, make_request(3, random_prompt(1, 9), greedy(12)));
  EXPECT_EQ(out.request_id, 3);
  EXPECT_EQ(out.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.completion_tokens, 12);
  EXPECT_EQ(out.token_ids.size(), 12u);
  EXPECT_EQ(out.prompt_tokens, 9);
  EXPECT_EQ(out.text, b.engine->tokenizer()->decode(out.token_ids, true));
  EXPECT_FALSE(out.text.empty());
}

// No max_tokens: the output runs to the context limit (max_model_len, or the whole KV cache when that
// is smaller), never to a hidden default of 16.
TEST(Engine, NoMaxTokensRunsToTheContextLimit) {
  Built b = make_engine(256, 16, true, 8, /*max_model_len=*/40);
  CompletionOutput out = run_one(*b.engine, make_request(0, random_prompt(2, 9), greedy(0)));
  EXPECT_EQ(out.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.completion_tokens, 40 - 9);
  Built small = make_engine(4, 8);  // 32 token slots, max_model_len 4096 from the model
  out = run_one(*small.engine, make_request(1, random_prompt(3, 10), greedy(0)));
  EXPECT_EQ(out.finish_reason, FinishReason::kLength) << out.error;
  EXPECT_EQ(out.completion_tokens, 32 - 10);
}

// A max_tokens the context cannot hold is refused naming both numbers (as vLLM), never clamped.
TEST(Engine, MaxTokensBeyondTheContextIsRefused) {
  Built b = make_engine(256, 16, true, 8, /*max_model_len=*/40);
  try {
    b.engine->add_request(make_request(0, random_prompt(4, 9), greedy(32)));
    ADD_FAILURE() << "prompt 9 + max_tokens 32 accepted under max_model_len 40";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the prompt has 9 tokens and max_tokens is 32, 41 in all, but max_model_len is 40"),
              std::string::npos) << e.message();
  }
  EXPECT_EQ(run_one(*b.engine, make_request(1, random_prompt(4, 9), greedy(31))).completion_tokens, 31);
}

TEST(Engine, StopStringCutsTextAndStreamingConcatenatesToFinalText) {
  Built b = make_engine();
  const std::vector<int32_t> prompt = random_prompt(2, 11);
  CompletionOutput full = run_one(*b.engine, make_request(0, prompt, greedy(40)));
  ASSERT_GT(full.text.size(), 12u) << full.text;
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  const size_t cut = full.text.find(stop);

  for (bool include : {false, true}) {
    Built e = make_engine();
    std::map<int64_t, std::string> streamed;
    e.engine->set_stream_callback([&](int64_t id, const std::string& d) { streamed[id] += d; });
    SamplingParams p = greedy(40);
    p.stop = {"\x01never", stop};
    p.include_stop_str_in_output = include;
    CompletionOutput out = run_one(*e.engine, make_request(0, prompt, p));
    EXPECT_EQ(out.finish_reason, FinishReason::kStop);
    ASSERT_TRUE(out.stop_string.has_value());
    EXPECT_EQ(*out.stop_string, stop);
    EXPECT_EQ(out.text, full.text.substr(0, cut + (include ? stop.size() : 0)));
    EXPECT_LT(out.completion_tokens, 40);
    EXPECT_EQ(streamed[0], out.text);
  }
}

TEST(Engine, MinTokensHoldsBackEos) {
  for (int64_t min_tokens : {0, 5}) {
    Built b = make_engine();
    b.runner->boost(kEos);
    SamplingParams p = greedy(20);
    p.ignore_eos = false;
    p.min_tokens = min_tokens;
    CompletionOutput out = run_one(*b.engine, make_request(0, random_prompt(3, 6), p));
    EXPECT_EQ(out.finish_reason, FinishReason::kStop);
    ASSERT_EQ(out.completion_tokens, min_tokens + 1) << "min_tokens " << min_tokens;
    EXPECT_EQ(out.token_ids.back(), kEos);
    for (int64_t i = 0; i < min_tokens; ++i) EXPECT_NE(out.token_ids[i], kEos);
  }
}

TEST(Engine, SeedsReproducibleAcrossBatchingAndPreemption) {
  SamplingParams p;
  p.temperature = 1.0;
  p.max_tokens = 30;
  p.ignore_eos = true;
  std::vector<Request> batch;
  for (int i = 0; i < 10; ++i) {
    SamplingParams q = p;
    if (i % 2 == 0) q.seed = 1000 + i;  // odd requests: seed from runtime.seed and index
    batch.push_back(make_request(i, random_prompt(10 + i, 5 + 7 * i), q));
  }
  Built roomy = make_engine(512, 16);
  std::vector<CompletionOutput> a = roomy.engine->generate(batch);
  Built tight = make_engine(14, 8);  // the longest (68 + 30 tokens) needs 13 blocks: preemption guaranteed
  std::vector<CompletionOutput> c = tight.engine->generate(batch);
  EXPECT_GT(tight.engine->scheduler_stats().preemptions, 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c[i].finish_reason, FinishReason::kLength) << c[i].error;
    EXPECT_EQ(c[i].token_ids, a[i].token_ids) << "request " << i;
    EXPECT_EQ(c[i].text, a[i].text) << "request " << i;
    Built alone = make_engine();
    EXPECT_EQ(run_one(*alone.engine, batch[i]).token_ids, a[i].token_ids) << "request " << i << " alone";
  }
  EXPECT_NE(a[0].token_ids, a[2].token_ids);
  SamplingParams other = p;
  other.seed = 999;
  Built d = make_engine();
  EXPECT_NE(run_one(*d.engine, make_request(0, batch[0].prompt_ids, other)).token_ids, a[0].token_ids);
}

TEST(Engine, LogprobsReportedPerToken) {
  Built b = make_engine();
  SamplingParams p = greedy(6);
  p.logprobs = 3;
  CompletionOutput out = run_one(*b.engine, make_request(0, random_prompt(4, 4), p));
  ASSERT_EQ(out.logprobs.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out.logprobs[i].token, out.token_ids[i]);
    EXPECT_EQ(out.logprobs[i].rank, 1) << "greedy picks the most likely";
    ASSERT_EQ(out.logprobs[i].top.size(), 3u);
    EXPECT_EQ(out.logprobs[i].top[0].token, out.token_ids[i]);
    EXPECT_LT(out.logprobs[i].logprob, 0.f);
  }
}

TEST(Engine, InvalidRequestsAreRefusedByName) {
  Built b = make_engine();
  auto expect_error = [&](Request r, const std::string& needle) {
    try {
      b.engine->add_request(std::move(r));
      ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
    }
  };
  expect_error(make_request(0, {}, greedy(4)), "the prompt is empty");
  expect_error(make_request(1, {5, 99999}, greedy(4)), "prompt token id 99999 at position 1");
  std::vector<int32_t> huge(4096, 5);
  expect_error(make_request(2, huge, greedy(4)), "the prompt has 4096 tokens and needs room for 1 generated token(s), "
                                                 "but max_model_len is 4096");
  SamplingParams bad = greedy(4);
  bad.top_p = 0.0;
  expect_error(make_request(3, {5}, bad), "top_p");
  EXPECT_FALSE(b.engine->has_unfinished());

  Built n = make_engine(64, 16, /*with_tokenizer=*/false);
  SamplingParams s = greedy(4);
  s.stop = {"x"};
  try {
    n.engine->add_request(make_request(4, {5}, s));
    ADD_FAILURE() << "stop strings accepted without a tokenizer";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("stop strings need a tokenizer"), std::string::npos) << e.message();
  }
  CompletionOutput out = run_one(*n.engine, make_request(5, {5, 6}, greedy(4)));
  EXPECT_EQ(out.token_ids.size(), 4u);
  EXPECT_TRUE(out.text.empty());
}

TEST(Engine, SequenceThatNeverFitsIsAFailedOutputNotAnException) {
  Built b = make_engine(4, 8);  // 32 token slots
  std::vector<CompletionOutput> outs =
      b.engine->generate({make_request(0, random_prompt(5, 10), greedy(50)), make_request(1, random_prompt(6, 5), greedy(8))});
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kError);
  EXPECT_NE(outs[0].error.find("KV blocks"), std::string::npos) << outs[0].error;
  EXPECT_EQ(outs[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(outs[1].completion_tokens, 8);
}

// Replicas send outputs to the job's rank as JSON: every field survives, and the finish reason
// travels as OpenAI's text ("stop", "length") or "error".
TEST(Engine, CompletionOutputRoundTripsThroughJson) {
  std::mt19937 rng(7);
  for (FinishReason reason : {FinishReason::kStop, FinishReason::kLength, FinishReason::kError}) {
    CompletionOutput out;
    out.request_id = static_cast<int64_t>(rng() % 1000);
    out.text = "text " + std::to_string(rng());
    for (int i = 0; i < 5; ++i) out.token_ids.push_back(static_cast<int32_t>(rng() % 50000));
    out.finish_reason = reason;
    out.stop_string = "###";
    out.prompt_tokens = 11;
    out.completion_tokens = 5;
    out.logprobs.push_back({out.token_ids[0], -0.25f, 1, {{out.token_ids[0], -0.25f}, {17, -1.5f}}});
    out.error = reason == FinishReason::kError ? "refused" : "";
    out.ttft_s = 0.125;
    out.tpot_s = 0.0625;
    const nlohmann::json j = completion_to_json(out);
    EXPECT_EQ(j["finish_reason"], finish_reason_name(reason));
    const CompletionOutput back = completion_from_json(j);
    EXPECT_EQ(back.request_id, out.request_id);
    EXPECT_EQ(back.text, out.text);
    EXPECT_EQ(back.token_ids, out.token_ids);
    EXPECT_EQ(back.finish_reason, reason);
    EXPECT_EQ(back.stop_string, out.stop_string);
    EXPECT_FALSE(back.stop_token.has_value());
    EXPECT_EQ(back.prompt_tokens, 11);
    EXPECT_EQ(back.completion_tokens, 5);
    ASSERT_EQ(back.logprobs.size(), 1u);
    EXPECT_EQ(back.logprobs[0].token, out.token_ids[0]);
    EXPECT_EQ(back.logprobs[0].logprob, -0.25f);
    EXPECT_EQ(back.logprobs[0].rank, 1);
    ASSERT_EQ(back.logprobs[0].top.size(), 2u);
    EXPECT_EQ(back.logprobs[0].top[1].token, 17);
    EXPECT_EQ(back.logprobs[0].top[1].logprob, -1.5f);
    EXPECT_EQ(back.error, out.error);
    EXPECT_EQ(back.ttft_s, 0.125);
    EXPECT_EQ(back.tpot_s, 0.0625);
  }
  CompletionOutput running;  // kNone: not an output anyone may send
  EXPECT_THROW(completion_to_json(running), Error);
  running.finish_reason = FinishReason::kStop;
  nlohmann::json bad = completion_to_json(running);
  bad["finish_reason"] = "abort";
  EXPECT_THROW(completion_from_json(bad), Error);
}

// The real CPU runner on transformers goldens: 16 requests (each golden prompt 4 times, with different
// max_tokens) through 20 blocks of 8 tokens and 32-token steps, so chunked prefill and preemption by
// recompute both happen; every request still gives transformers' greedy tokens.
TEST(Engine, CpuRunnerWithPreemptionMatchesGoldenGreedyTokens) {
  for (const char* model : {"llama3_rope", "qwen2_tied_mqa"}) {
    const std::string dir = testing::data_path(std::string("goldens/") + model);
    std::ifstream in(dir + "/golden.json");
    const nlohmann::json golden = nlohmann::json::parse(in);
    Config cfg;
    cfg.set("model.path", dir, "test");
    cfg.set("cache.num_blocks", "20", "test");
    cfg.set("cache.block_size", "8", "test");
    cfg.set("scheduler.max_num_batched_tokens", "32", "test");
    cfg.set("scheduler.max_num_seqs", "16", "test");
    const ModelSpec spec = load_model_spec(dir);
    Engine engine(make_cpu_model_runner(StageOptions::from_config(cfg), spec), nullptr, EngineOptions::from_config(cfg));
    std::vector<Request> reqs;
    std::vector<std::vector<int32_t>> want;
    for (int copy = 0; copy < 4; ++copy) {
      for (const auto& p : golden["prompts"]) {
        auto g = p["greedy_ids"].get<std::vector<int32_t>>();
        g.resize(g.size() - 7 * static_cast<size_t>(copy));
        reqs.push_back(make_request(static_cast<int64_t>(reqs.size()), p["prompt_ids"].get<std::vector<int32_t>>(),
                                    greedy(static_cast<int64_t>(g.size()))));
        want.push_back(g);
      }
    }
    const std::vector<CompletionOutput> outs = engine.generate(reqs);
    EXPECT_GT(engine.scheduler_stats().preemptions, 0) << model;
    for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i].token_ids, want[i]) << model << " request " << i;
  }
}

}  // namespace
}  // namespace conveyor
