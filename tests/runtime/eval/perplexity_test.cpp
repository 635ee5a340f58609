// Perplexity protocol pieces: chunking, the NLL and KLD statistics against direct formulas on
// random values, and the KL-divergence base file (round trip within fp16, truncation refused).
#include "runtime/eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "runtime/core/error.h"
#include "runtime/eval/logprob_file.h"

namespace conveyor {
namespace {

std::vector<float> random_logprobs(int64_t vocab, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> x(static_cast<size_t>(vocab));
  for (auto& v : x) v = n(rng);
  double m = -INFINITY, z = 0;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  for (float v : x) z += std::exp(v - m);
  for (auto& v : x) v = static_cast<float>(v - (m + std::log(z)));
  return x;
}

TEST(Perplexity, ChunkingFollowsTheProtocol) {
  const PerplexityChunking c = make_chunking(25166, 512, -1, -1);
  EXPECT_EQ(c.n_chunks, 49);
  EXPECT_EQ(c.first_scored(), 257);
  EXPECT_EQ(c.scored_per_chunk(), 255);
  EXPECT_EQ(make_chunking(25166, 512, -1, 2).n_chunks, 2);
  EXPECT_THROW(make_chunking(100, 512, -1, -1), Error);
  EXPECT_THROW(make_chunking(1000, 512, -1, 0), Error);
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(100 + i);
  const PerplexityChunking b = make_chunking(40, 16, 1, -1);
  EXPECT_EQ(b.n_chunks, 2);
  const std::vector<int32_t> second = b.chunk(tokens, 1);
  EXPECT_EQ(second.size(), 16u);
  EXPECT_EQ(second[0], 1);    // BOS replaces the chunk's first token
  EXPECT_EQ(second[1], 117);
}

TEST(Perplexity, StatisticsMatchTheirFormulas) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0.1, 8.0);
  std::vector<double> x(300);
  NllStats s;
  for (auto& v : x) s.add(v = u(rng));
  double mean = 0, var = 0;
  for (double v : x) mean += v / x.size();
  for (double v : x) var += (v - mean) * (v - mean) / x.size();
  const double se = std::sqrt(var / (x.size() - 1));
  EXPECT_NEAR(s.mean(), mean, 1e-12);
  EXPECT_NEAR(s.ppl(), std::exp(mean), 1e-9 * std::exp(mean));
  EXPECT_NEAR(s.ppl_error(), std::exp(mean) * se, 1e-7 * std::exp(mean) * se);
}

TEST(Perplexity, KlDivergence) {
  std::mt19937_64 rng(3);
  const int64_t vocab = 1000;
  const std::vector<float> a = random_logprobs(vocab, rng), b = random_logprobs(vocab, rng);
  EXPECT_NEAR(kl_divergence(a.data(), a.data(), vocab), 0.0, 1e-6);
  double want = 0;
  for (int64_t i = 0; i < vocab; ++i) want += std::exp(static_cast<double>(a[i])) * (a[i] - b[i]);
  EXPECT_NEAR(kl_divergence(a.data(), b.data(), vocab), want, 1e-5 * std::abs(want));
  EXPECT_GT(want, 0.0);
  std::vector<float> shifted = a;  // an unnormalised base is renormalised first
  for (auto& v : shifted) v += 0.25f;
  EXPECT_NEAR(kl_divergence(shifted.data(), b.data(), vocab), want, 1e-4 * std::abs(want));
  int32_t best = 0;
  for (int64_t i = 0; i < vocab; ++i)
    if (a[i] > a[best]) best = static_cast<int32_t>(i);
  EXPECT_EQ(top_token(a.data(), vocab), best);
}

TEST(LogprobFile, RoundTripWithinHalfPrecisionAndTruncationIsRefused) {
  std::mt19937_64 rng(5);
  LogprobFileHeader h;
  h.vocab = 300;
  h.ctx = 8;
  h.n_chunks = 2;
  h.scored_per_chunk = 3;
  h.first_scored = 5;
  h.bos = 1;
  h.model = "tiny";
  std::vector<int32_t> tokens(16);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 300);
  const std::string path = ::testing::TempDir() + "/logprobs.bin";
  std::vector<std::vector<float>> chunks;
  {
    LogprobFileWriter w(path, h, tokens);
    for (uint32_t c = 0; c < h.n_chunks; ++c) {
      std::vector<float> rows;
      for (uint32_t r = 0; r < h.scored_per_chunk; ++r) {
        const std::vector<float> row = random_logprobs(h.vocab, rng);
        rows.insert(rows.end(), row.begin(), row.end());
      }
      w.write_chunk(rows);
      chunks.push_back(rows);
    }
    w.close();
  }
  LogprobFileReader r(path);
  EXPECT_EQ(r.header().model, "tiny");
  EXPECT_EQ(r.header().bos, 1);
  EXPECT_EQ(r.tokens(), tokens);
  for (const auto& want : chunks) {
    const std::vector<float>& got = r.read_chunk();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * 1e-3 + 1e-4) << i;
  }
  EXPECT_THROW(r.read_chunk(), Error);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 10));
  LogprobFileReader cut(path);
  cut.read_chunk();
  EXPECT_THROW(cut.read_chunk(), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace conveyor
