// Sampler: each stage does what vLLM's does, checked on random logits with fixed seeds. Distribution
// checks draw 20k tokens and require every token's count within 5 sigma of the expected one (and
// zero where the expected probability is zero); penalties are checked bit-exactly per formula.
#include "runtime/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using conveyor::testing::random_floats;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// softmax(x / T) in double, with -inf (removed) tokens at probability 0.
std::vector<double> softmax(const std::vector<float>& x, double t = 1.0) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, v / t);
  std::vector<double> p(x.size());
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += (p[i] = x[i] == kNegInf ? 0.0 : std::exp(x[i] / t - m));
  for (double& v : p) v /= sum;
  return p;
}

// Keeps the tokens `keep` says to and renormalises.
std::vector<double> restrict_to(std::vector<double> p, const std::vector<bool>& keep) {
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sum += keep[i] ? p[i] : 0.0;
  for (size_t i = 0; i < p.size(); ++i) p[i] = keep[i] ? p[i] / sum : 0.0;
  return p;
}

// Token ids by descending probability, lower id first on ties.
std::vector<size_t> order_desc(const std::vector<double>& p) {
  std::vector<size_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  return ids;
}

// Generates `draws` tokens for one sequence, appending each to its output as generation does.
std::vector<int64_t> draw_counts(const std::vector<float>& logits, const SamplingParams& params, int draws,
                                 uint64_t seed) {
  Sampler sampler({});
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> output;
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    SampleResult r = sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), {prompt, output, seed}, params);
    counts.at(r.token)++;
    output.push_back(r.token);
  }
  return counts;
}

// Every count within 5 sigma of draws * p (binomial), and exactly zero where p is zero.
void expect_frequencies(const std::vector<int64_t>& counts, const std::vector<double>& p, int draws) {
  for (size_t i = 0; i < p.size(); ++i) {
    double mean = draws * p[i];
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    double sigma = std::sqrt(draws * p[i] * (1.0 - p[i]));
    EXPECT_LE(std::fabs(counts[i] - mean), 5.0 * sigma + 1.0)
        << "token " << i << ": drawn " << counts[i] << " times, expected " << mean << " +- " << sigma;
  }
}

constexpr int kDraws = 20000;

TEST(SamplerTest, CounterBasedGeneratorIsSplitMix64) {
  // splitmix64 seeded with 0 yields 0xE220A8397B1DCDAF first: pins the constants the CUDA sampler copies.
  EXPECT_EQ(mix64(0), 0xE220A8397B1DCDAFull);
  double sum = 0.0;
  for (uint64_t t = 0; t < 100000; ++t) {
    double u = sampling_uniform(7, 3, t);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 5 * std::sqrt(1.0 / 12 / 100000));
  EXPECT_NE(sampling_uniform(7, 3, 0), sampling_uniform(7, 4, 0));
  EXPECT_NE(sampling_uniform(7, 3, 0), sampling_uniform(8, 3, 0));
  EXPECT_DOUBLE_EQ(sampling_gumbel(7, 3, 5), -std::log(-std::log(sampling_uniform(7, 3, 5))));
}

TEST(SamplerTest, TemperatureMatchesSoftmax) {
  std::vector<float> logits = random_floats(10, 11, -2.f, 2.f);
  for (double t : {0.5, 1.0, 2.0}) {
    SCOPED_TRACE(t);
    SamplingParams p;
    p.temperature = t;
    expect_frequencies(draw_counts(logits, p, kDraws, 1234), softmax(logits, t), kDraws);
  }
}

TEST(SamplerTest, TopKNeverOutsideTopKAndAllReachable) {
  std::vector<float> logits = random_floats(64, 12, -3.f, 3.f);
  SamplingParams p;
  p.top_k = 5;
  std::vector<double> full = softmax(logits);
  std::vector<size_t> order = order_desc(full);
  std::vector<bool> keep(logits.size(), false);
  for (int i = 0; i < 5; ++i) keep[order[i]] = true;
  std::vector<int64_t> counts = draw_counts(logits, p, kDraws, 99);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (keep[i]) {
      EXPECT_GT(counts[i], 0) << "top-k token " << i << " never drawn";
    }
  }
  expect_frequencies(counts, restrict_to(full, keep), kDraws);
}

TEST(SamplerTest, TopPNeverOutsideNucleusAndAllReachable) {
  std::vector<float> logits = random_floats(32, 13, -2.f, 2.f);
  for (double top_p : {0.3, 0.6, 0.9}) {
    SCOPED_TRACE(top_p);
    SamplingParams p;
    p.top_p = top_p;
    p.temperature = 0.8;
    std::vector<double> full = softmax(logits, 0.8);
    std::vector<bool> keep(logits.size(), false);
    double before = 0.0;
    size_t kept = 0;
    for (size_t id : order_desc(full)) {
      if (before >= top_p) break;
      keep[id] = true, before += full[id], ++kept;
    }
    ASSERT_GE(kept, 2u);
    ASSERT_LT(kept, logits.size());
    std::vector<int64_t> counts = draw_counts(logits, p, kDraws, 5);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (keep[i]) {
        EXPECT_GT(counts[i], 0) << "nucleus token " << i << " never drawn";
      }
    }
    expect_frequencies(counts, restrict_to(full, keep), kDraws);
  }
}

// A vocabulary large enough that apply_top_p selects a growing head instead of sorting everything:
// the kept set must still be exactly the nucleus of a full sort.
TEST(SamplerTest, TopPOnLargeVocabEqualsFullSortNucleus) {
  std::vector<float> logits = random_floats(20000, 27, -8.f, 8.f);
  for (double top_p : {0.05, 0.5, 0.9, 0.999}) {
    SCOPED_TRACE(top_p);
    std::vector<double> full = softmax(logits);
    std::vector<bool> keep(logits.size(), false);
    double before = 0.0;
    for (size_t id : order_desc(full)) {
      if (before >= top_p) break;
      keep[id] = true, before += full[id];
    }
    std::vector<float> got = logits;
    apply_top_p(got, top_p);
    size_t kept = 0, wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      kept += keep[i];
      if ((got[i] != kNegInf) != keep[i] || (keep[i] && got[i] != logits[i])) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "of " << kept << " nucleus tokens";
    EXPECT_GT(kept, 1u);
  }
}

TEST(SamplerTest, MinPDropsTokensBelowThreshold) {
  std::vector<float> logits = random_floats(32, 14, -2.f, 2.f);
  SamplingParams p;
  p.min_p = 0.3;
  std::vector<double> full = softmax(logits);
  double top = *std::max_element(full.begin(), full.end());
  std::vector<bool> keep(logits.size());
  size_t kept = 0;
  for (size_t i = 0; i < full.size(); ++i) kept += (keep[i] = full[i] >= 0.3 * top);
  ASSERT_GE(kept, 2u);
  ASSERT_LT(kept, logits.size());
  expect_frequencies(draw_counts(logits, p, kDraws, 6), restrict_to(full, keep), kDraws);
}

// Temperature, then top-k, then top-p on the renormalised top-k, then min-p: checks the order.
TEST(SamplerTest, StagesComposeInVllmOrder) {
  std::vector<float> logits = random_floats(48, 15, -3.f, 3.f);
  SamplingParams p;
  p.temperature = 1.3;
  p.top_k = 10;
  p.top_p = 0.8;
  p.min_p = 0.15;
  std::vector<double> q = softmax(logits, p.temperature);
  std::vector<size_t> order = order_desc(q);
  std::vector<bool> keep(q.size(), false);
  for (int i = 0; i < 10; ++i) keep[order[i]] = true;
  q = restrict_to(q, keep);
  double before = 0.0;
  for (size_t id : order) {
    if (keep[id] && before >= p.top_p) keep[id] = false;
    before += q[id];
  }
  q = restrict_to(q, keep);
  double top = *std::max_element(q.begin(), q.end());
  for (size_t i = 0; i < q.size(); ++i) keep[i] = keep[i] && q[i] >= p.min_p * top;
  q = restrict_to(q, keep);
  ASSERT_GE(std::count(keep.begin(), keep.end(), true), 3);
  expect_frequencies(draw_counts(logits, p, kDraws, 8), q, kDraws);
}

TEST(SamplerTest, PenaltiesFollowTheFormulasExactly) {
  std::vector<float> logits = random_floats(16, 16, -2.f, 2.f);
  std::vector<int32_t> prompt = {1, 2, 2, 5, 9};
  std::vector<int32_t> output = {2, 3, 3, 3, 7, 9, 12};
  SamplingParams p;
  p.repetition_penalty = 1.3;
  p.frequency_penalty = 0.4;
  p.presence_penalty = -0.25;
  std::vector<float> got = logits;
  apply_penalties(got, prompt, output, p);
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  seen.insert(output.begin(), output.end());
  int positive = 0, negative = 0;
  for (int32_t i = 0; i < 16; ++i) {
    float want = logits[i];
    if (seen.count(i)) {
      want = want > 0.f ? want / 1.3f : want * 1.3f;
      (logits[i] > 0.f ? positive : negative)++;
    }
    int count = static_cast<int>(std::count(output.begin(), output.end(), i));
    want -= 0.4f * static_cast<float>(count);
    if (count > 0) want -= -0.25f;
    EXPECT_EQ(got[i], want) << "token " << i << " (raw " << logits[i] << ", " << count << " in output)";
  }
  EXPECT_GT(positive, 0);  // both branches of the repetition penalty were exercised
  EXPECT_GT(negative, 0);
}

TEST(SamplerTest, RepetitionPenaltyChangesGreedyChoice) {
  std::vector<float> logits = random_floats(16, 17, -1.f, 1.f);
  logits[4] = 3.0f;
  logits[6] = 2.5f;
  SamplingParams p;
  p.temperature = 0.0;
  Sampler sampler({});
  std::vector<int32_t> prompt = {4};
  std::vector<int32_t> none;
  EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, none, 1}, p).token, 4);
  p.repetition_penalty = 1.5;  // 3.0 / 1.5 = 2.0 < 2.5
  EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, none, 1}, p).token, 6);
  p.repetition_penalty = 1.0;
  p.presence_penalty = 0.6;  // output-only: the prompt's token 4 is not penalised
  EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, none, 1}, p).token, 4);
  std::vector<int32_t> output = {4};
  EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, output, 1}, p).token, 6);
}

TEST(SamplerTest, PenaltyOnTokenOutsideVocabIsAnError) {
  std::vector<float> logits = random_floats(8, 18);
  SamplingParams p;
  p.repetition_penalty = 1.2;
  std::vector<int32_t> prompt = {3, 8};
  std::vector<int32_t> none;
  Sampler sampler({});
  try {
    sampler.sample(logits.data(), 8, {prompt, none, 1}, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("token id 8 is outside the vocabulary [0, 8)"), std::string::npos) << e.message();
  }
}

TEST(SamplerTest, GreedyTakesLowestIdOnTiesAndIgnoresSeed) {
  std::vector<float> logits = random_floats(32, 19, -1.f, 1.f);
  logits[7] = 5.f;
  logits[3] = 5.f;
  logits[20] = 5.f;
  SamplingParams p;
  p.temperature = 0.0;
  p.top_k = 2;  // ignored when greedy, as in vLLM
  Sampler sampler({});
  std::vector<int32_t> prompt = {0}, output;
  for (uint64_t seed : {1u, 2u, 3u}) EXPECT_EQ(sampler.sample(logits.data(), 32, {prompt, output, seed}, p).token, 3);
  EXPECT_EQ(argmax_token(logits), 3);
}

std::vector<int32_t> generate(const std::vector<float>& logits, uint64_t seed, int n, Sampler& sampler,
                              const SamplingParams& p) {
  std::vector<int32_t> prompt = {1}, output;
  for (int i = 0; i < n; ++i) {
    output.push_back(sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), {prompt, output, seed}, p).token);
  }
  return output;
}

TEST(SamplerTest, SameSeedSameTokensWhateverTheBatch) {
  std::vector<float> logits = random_floats(50, 20, -1.f, 1.f);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_p = 0.95;
  p.frequency_penalty = 0.3;
  Sampler a({}), b({});
  std::vector<int32_t> first = generate(logits, 42, 200, a, p);
  EXPECT_EQ(first, generate(logits, 42, 200, b, p));
  EXPECT_NE(first, generate(logits, 43, 200, b, p));
  // Interleaved with another sequence in the same sampler (another batch composition): unchanged.
  std::vector<float> other = random_floats(50, 21);
  std::vector<int32_t> prompt = {1}, mine, theirs;
  for (int i = 0; i < 200; ++i) {
    theirs.push_back(a.sample(other.data(), 50, {prompt, theirs, 7}, p).token);
    mine.push_back(a.sample(logits.data(), 50, {prompt, mine, 42}, p).token);
  }
  EXPECT_EQ(mine, first);
}

TEST(SamplerTest, RequestSeedUsesExplicitSeedOrGlobalSeedAndIndex) {
  SamplingParams p;
  p.seed = -5;
  EXPECT_EQ(request_seed(p, 1, 2), static_cast<uint64_t>(int64_t{-5}));
  p.seed.reset();
  EXPECT_EQ(request_seed(p, 1, 2), request_seed(p, 1, 2));
  EXPECT_NE(request_seed(p, 1, 2), request_seed(p, 1, 3));
  EXPECT_NE(request_seed(p, 1, 2), request_seed(p, 2, 2));
  EXPECT_NE(request_seed(p, 0, 1), request_seed(p, 1, 0));
}

// log_softmax in double, the reference for raw logprobs.
std::vector<double> log_softmax(const std::vector<float>& x) {
  std::vector<double> p = softmax(x);
  for (double& v : p) v = std::log(v);
  return p;
}

TEST(SamplerTest, LogprobsAreRawSumToOneAndOrdered) {
  std::vector<float> logits = random_floats(20, 22, -3.f, 3.f);
  logits[11] = logits[4];  // a tie: the lower id must come first
  std::vector<double> want = log_softmax(logits);
  SamplingParams p;
  p.logprobs = 20;
  p.temperature = 0.5;  // processing must not change the reported (raw) logprobs
  p.repetition_penalty = 1.7;
  p.top_k = 3;
  Sampler sampler({});
  std::vector<int32_t> prompt = {4, 5}, output = {6};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SampleResult r = sampler.sample(logits.data(), 20, {prompt, output, seed}, p);
    ASSERT_TRUE(r.has_logprobs);
    EXPECT_NEAR(r.logprob, want[r.token], 1e-6);
    int64_t rank = 1;
    for (float v : logits) rank += v > logits[r.token];
    EXPECT_EQ(r.rank, rank);
    ASSERT_EQ(r.top.size(), 20u);
    double mass = 0.0;
    std::set<int32_t> ids;
    for (size_t i = 0; i < r.top.size(); ++i) {
      EXPECT_NEAR(r.top[i].logprob, want[r.top[i].token], 1e-6);
      mass += std::exp(static_cast<double>(r.top[i].logprob));
      ids.insert(r.top[i].token);
      if (i > 0) {
        EXPECT_GE(r.top[i - 1].logprob, r.top[i].logprob);
      }
    }
    EXPECT_EQ(ids.size(), 20u);
    EXPECT_NEAR(mass, 1.0, 1e-5);
    auto pos = [&](int32_t id) {
      return std::find_if(r.top.begin(), r.top.end(), [&](const TokenLogprob& t) { return t.token == id; });
    };
    EXPECT_LT(pos(4), pos(11));
  }
}

TEST(SamplerTest, LogprobsCountAndAbsence) {
  std::vector<float> logits = random_floats(100, 23, -3.f, 3.f);
  std::vector<double> want = log_softmax(logits);
  std::vector<size_t> order = order_desc(softmax(logits));
  Sampler sampler({});
  std::vector<int32_t> prompt = {0}, output;
  SamplingParams p;
  EXPECT_FALSE(sampler.sample(logits.data(), 100, {prompt, output, 1}, p).has_logprobs);
  p.logprobs = 0;
  SampleResult r0 = sampler.sample(logits.data(), 100, {prompt, output, 1}, p);
  EXPECT_TRUE(r0.has_logprobs);
  EXPECT_TRUE(r0.top.empty());
  EXPECT_NEAR(r0.logprob, want[r0.token], 1e-6);
  p.logprobs = 5;
  SampleResult r5 = sampler.sample(logits.data(), 100, {prompt, output, 1}, p);
  ASSERT_EQ(r5.top.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r5.top[i].token, static_cast<int32_t>(order[i]));
}

TEST(SamplerTest, MinTokensMasksEosAndStopTokens) {
  std::vector<float> logits = random_floats(16, 24, -1.f, 1.f);
  logits[5] = 9.f;   // EOS
  logits[9] = 8.f;   // second EOS id
  logits[11] = 8.5f; // stop token
  SamplingParams p;
  p.min_tokens = 3;
  p.max_tokens = 10;
  p.stop_token_ids = {11};
  std::set<int32_t> stops = {5, 9, 11};
  for (double t : {0.0, 1.0}) {
    SCOPED_TRACE(t);
    p.temperature = t;
    Sampler sampler({5, 9});
    std::vector<int32_t> prompt = {1}, output;
    for (uint64_t seed = 0; seed < 50; ++seed) {
      output.clear();
      for (int i = 0; i < 3; ++i) {
        output.push_back(sampler.sample(logits.data(), 16, {prompt, output, seed}, p).token);
        EXPECT_EQ(stops.count(output.back()), 0u) << "stop token " << output.back() << " at output " << i;
      }
      if (t == 0.0) {
        EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, output, seed}, p).token, 5);
      }
    }
  }
  // With ignore_eos, EOS is an ordinary token (not masked); stop_token_ids still are.
  p.temperature = 0.0;
  p.ignore_eos = true;
  Sampler sampler({5, 9});
  std::vector<int32_t> prompt = {1}, output;
  EXPECT_EQ(sampler.sample(logits.data(), 16, {prompt, output, 0}, p).token, 5);
  std::vector<float> masked = logits;
  apply_min_tokens_mask(masked, 0, {5, 9}, p);
  EXPECT_EQ(masked[11], kNegInf);
  EXPECT_EQ(masked[5], logits[5]);
}

TEST(SamplerTest, NonFiniteLogitsAreAnError) {
  std::vector<float> logits = random_floats(8, 25);
  logits[6] = std::nanf("");
  SamplingParams p;
  Sampler sampler({});
  std::vector<int32_t> prompt = {0}, output;
  try {
    sampler.sample(logits.data(), 8, {prompt, output, 1}, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("logit nan for token 6"), std::string::npos) << e.message();
  }
  // -inf is a legitimately removed token (e.g. vocabulary padding) and is never drawn.
  logits[6] = kNegInf;
  EXPECT_EQ(draw_counts(logits, p, 2000, 3)[6], 0);
}

TEST(SamplerTest, StopTokenIdOutsideVocabIsAnError) {
  std::vector<float> logits = random_floats(8, 26);
  SamplingParams p;
  p.stop_token_ids = {20};
  Sampler sampler({});
  std::vector<int32_t> prompt = {0}, output;
  EXPECT_THROW(sampler.sample(logits.data(), 8, {prompt, output, 1}, p), Error);
}

}  // namespace
}  // namespace conveyor
