// The FP8 KV cache twin: write_kv_cache_fp8_ref stores, for every element of every new token, the e4m3
// code nearest x / scale (a brute-force search over the 254 finite codes, ties to the even code),
// saturating at +-448 and keeping NaN as 0x7f, and touches nothing else; paged_attention_fp8_ref equals
// paged_attention_ref over fp32 caches holding code * scale bit for bit (paged, GQA/MQA, windows, mixed
// decode and prefill batches, chunked prefill); and it stays within e4m3's error of fp32 attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/fp8.h"
#include "runtime/core/error.h"
#include "tests/kernels/paged_layout.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

double code_value(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// The nearest finite code to y (saturated to +-448), ties to the even code; NaN -> 0x7f.
uint8_t nearest_code(float y) {
  if (std::isnan(y)) return 0x7f;
  const double t = std::clamp(static_cast<double>(y), -448.0, 448.0);
  int best = -1;
  double best_err = 1e300;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f || (c & 0x80) != (std::signbit(t) ? 0x80 : 0)) continue;  // NaN, other sign
    const double err = std::fabs(code_value(c) - t);
    if (err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

struct Geometry {
  int n_heads, n_kv_heads, head_dim, block_size, window;
};

using Batch = testing::PagedLayout;

Batch make_batch(const Geometry& g, const std::vector<std::pair<int, int>>& seqs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return testing::lay_out(seqs, g.block_size, g.n_kv_heads, g.head_dim, rng);
}
// A pool of random codes (history and garbage alike), never NaN codes, so reads of history are finite.
std::vector<uint8_t> random_codes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> c(n);
  for (uint8_t& x : c) {
    x = static_cast<uint8_t>(rng() & 0xff);
    if ((x & 0x7f) == 0x7f) x ^= 1;
  }
  return c;
}

std::vector<float> decode(const std::vector<uint8_t>& codes, float scale) {
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = fp8_e4m3_to_float(codes[i]) * scale;
  return out;
}

const std::vector<std::pair<int, int>> kMixed = {{0, 1}, {40, 1}, {300, 1}, {0, 9}, {37, 5}, {100, 40}};

TEST(Fp8KvWrite, CodesAreTheNearestOfXOverScale) {
  const Geometry g{8, 2, 32, 16, 0};
  const Batch b = make_batch(g, kMixed, 1);
  const KvScales scales{0.0123f, 0.5f};
  const size_t row = b.shape.token_elems();
  // |k / 0.0123| reaches ~490: some elements saturate; |v / 0.5| < 4 includes subnormal codes.
  const std::vector<float> k = random_floats(b.tokens() * row, 2, -6.f, 6.f);
  const std::vector<float> v = random_floats(b.tokens() * row, 3, -2.f, 2.f);
  std::vector<uint8_t> kc(b.shape.layer_elems(), 0x55), vc(b.shape.layer_elems(), 0x55);
  write_kv_cache_fp8_ref(kc.data(), vc.data(), k.data(), v.data(), b.batch(), b.shape, scales);
  std::vector<bool> written(kc.size(), false);
  int saturated = 0;
  for (size_t s = 0; s + 1 < b.query_start.size(); ++s) {
    for (int t = b.query_start[s]; t < b.query_start[s + 1]; ++t) {
      const int pos = b.positions[static_cast<size_t>(t)];
      const size_t block = static_cast<size_t>(b.tables[s * b.max_blocks + pos / g.block_size]);
      const size_t base = (block * g.block_size + pos % g.block_size) * row;
      for (size_t i = 0; i < row; ++i) {
        const size_t x = static_cast<size_t>(t) * row + i;
        ASSERT_EQ(kc[base + i], nearest_code(k[x] / scales.k)) << "K of token " << t << " element " << i;
        ASSERT_EQ(vc[base + i], nearest_code(v[x] / scales.v)) << "V of token " << t << " element " << i;
        saturated += (kc[base + i] & 0x7f) == 0x7e;
        written[base + i] = true;
      }
    }
  }
  EXPECT_GT(saturated, 0);  // the case exercises saturation
  for (size_t i = 0; i < kc.size(); ++i) {
    if (written[i]) continue;
    ASSERT_TRUE(kc[i] == 0x55 && vc[i] == 0x55) << "slot " << i << " was not to be written";
  }
}

TEST(Fp8KvWrite, SaturatesAndKeepsNaN) {
  const Geometry g{1, 1, 8, 4, 0};
  const Batch b = make_batch(g, {{0, 1}}, 4);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> k = {1e4f, -1e4f, inf, -inf, nan, 448.f, 449.f, -0.f};
  const std::vector<float> v = {0.f, 1e-30f, -1e-30f, 465.f, 464.f, 2.f, nan, 1.f};
  std::vector<uint8_t> kc(b.shape.layer_elems()), vc(b.shape.layer_elems());
  write_kv_cache_fp8_ref(kc.data(), vc.data(), k.data(), v.data(), b.batch(), b.shape, KvScales{1.f, 1.f});
  const size_t base = static_cast<size_t>(b.tables[0]) * g.block_size * b.shape.token_elems();
  const std::vector<uint8_t> want_k = {0x7e, 0xfe, 0x7e, 0xfe, 0x7f, 0x7e, 0x7e, 0x80};
  const std::vector<uint8_t> want_v = {0x00, 0x00, 0x80, 0x7e, 0x7e, 0x40, 0x7f, 0x38};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(kc[base + i], want_k[i]) << "K element " << i;
    EXPECT_EQ(vc[base + i], want_v[i]) << "V element " << i;
  }
  // A NaN code reads back as NaN (times any scale).
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(kc[base + 4]) * 2.f));
}

TEST(Fp8KvWrite, RefusesBadScalesAndPositionsBeforeWriting) {
  const Geometry g{2, 1, 8, 4, 0};
  Batch b = make_batch(g, {{0, 3}}, 5);
  const std::vector<float> k = random_floats(3 * 8, 6), v = random_floats(3 * 8, 7);
  std::vector<uint8_t> kc(b.shape.layer_elems(), 0x11), vc(b.shape.layer_elems(), 0x11);
  for (const KvScales& s : {KvScales{0.f, 1.f}, KvScales{1.f, -1.f}, KvScales{std::nanf(""), 1.f},
                            KvScales{1.f, std::numeric_limits<float>::infinity()}})
    EXPECT_THROW(write_kv_cache_fp8_ref(kc.data(), vc.data(), k.data(), v.data(), b.batch(), b.shape, s), Error);
  b.tables[0] = b.shape.num_blocks;  // outside the pool
  EXPECT_THROW(write_kv_cache_fp8_ref(kc.data(), vc.data(), k.data(), v.data(), b.batch(), b.shape, KvScales{}), Error);
  EXPECT_TRUE(std::all_of(kc.begin(), kc.end(), [](uint8_t c) { return c == 0x11; }));
}

// FP8 attention over a random code pool equals fp32 attention over the decoded pool, exactly.
void expect_equal_to_decoded(const Geometry& g, const std::vector<std::pair<int, int>>& seqs, uint64_t seed) {
  SCOPED_TRACE("heads " + std::to_string(g.n_heads) + "/" + std::to_string(g.n_kv_heads) + " d" +
               std::to_string(g.head_dim) + " window " + std::to_string(g.window));
  const Batch b = make_batch(g, seqs, seed);
  const KvScales scales{0.02f, 0.0075f};
  const size_t row = b.shape.token_elems(), q_row = static_cast<size_t>(g.n_heads) * g.head_dim;
  std::vector<uint8_t> kc = random_codes(b.shape.layer_elems(), seed + 1), vc = random_codes(b.shape.layer_elems(), seed + 2);
  const std::vector<float> k = random_floats(b.tokens() * row, seed + 3, -4.f, 4.f);
  const std::vector<float> v = random_floats(b.tokens() * row, seed + 4, -2.f, 2.f);
  const std::vector<float> q = random_floats(b.tokens() * q_row, seed + 5, -2.f, 2.f);
  const AttentionParams p{g.n_heads, 1.f / std::sqrt(static_cast<float>(g.head_dim)), g.window};
  std::vector<float> got(b.tokens() * q_row);
  attention_fp8_ref(got.data(), q.data(), k.data(), v.data(), kc.data(), vc.data(), b.batch(), b.shape, p, scales);
  const std::vector<float> kf = decode(kc, scales.k), vf = decode(vc, scales.v);
  std::vector<float> want(got.size());
  paged_attention_ref(want.data(), q.data(), kf.data(), vf.data(), b.batch(), b.shape, p);
  EXPECT_EQ(compare_all(got, want, 0.f, 0.f), "");
}

TEST(Fp8KvAttention, EqualsFp32AttentionOverDecodedCache) {
  expect_equal_to_decoded({8, 8, 64, 16, 0}, kMixed, 10);      // MHA
  expect_equal_to_decoded({12, 4, 64, 16, 0}, kMixed, 20);     // GQA, group of 3
  expect_equal_to_decoded({8, 1, 128, 32, 48}, kMixed, 30);    // MQA, sliding window
  expect_equal_to_decoded({6, 2, 32, 48, 0}, {{1000, 1}, {0, 200}}, 40);  // long decode, long prefill
}

// A prompt prefilled in chunks gives the same outputs, bit for bit, as one prefill: a token's codes
// depend on its own K/V only.
TEST(Fp8KvAttention, ChunkedPrefillEqualsOnePrefill) {
  const Geometry g{6, 2, 32, 16, 0};
  const int n = 90;
  const Batch whole = make_batch(g, {{0, n}}, 50);
  const size_t row = whole.shape.token_elems(), q_row = static_cast<size_t>(g.n_heads) * g.head_dim;
  const std::vector<float> k = random_floats(n * row, 51), v = random_floats(n * row, 52), q = random_floats(n * q_row, 53);
  const AttentionParams p{g.n_heads, 0.25f, 0};
  const KvScales scales{0.004f, 0.003f};
  std::vector<uint8_t> kc(whole.shape.layer_elems()), vc(whole.shape.layer_elems());
  std::vector<float> once(n * q_row), chunked(n * q_row);
  attention_fp8_ref(once.data(), q.data(), k.data(), v.data(), kc.data(), vc.data(), whole.batch(), whole.shape, p,
                    scales);
  std::vector<uint8_t> kc2(kc.size(), 0x33), vc2(vc.size(), 0x33);
  for (int begin = 0; begin < n;) {
    const int len = std::min(n - begin, begin == 0 ? 17 : 31);
    Batch part = whole;
    part.query_start = {0, len};
    part.positions.assign(whole.positions.begin() + begin, whole.positions.begin() + begin + len);
    attention_fp8_ref(chunked.data() + begin * q_row, q.data() + begin * q_row, k.data() + begin * row,
                      v.data() + begin * row, kc2.data(), vc2.data(), part.batch(), part.shape, p, scales);
    begin += len;
  }
  EXPECT_EQ(compare_all(chunked, once, 0.f, 0.f), "");
}

// Against attention over the unquantized K/V: within what e4m3's 3 mantissa bits allow.
TEST(Fp8KvAttention, CloseToUnquantizedAttention) {
  const Geometry g{8, 2, 64, 16, 0};
  const Batch b = make_batch(g, kMixed, 60);
  const size_t row = b.shape.token_elems(), q_row = static_cast<size_t>(g.n_heads) * g.head_dim;
  const std::vector<float> k = random_floats(b.tokens() * row, 61), v = random_floats(b.tokens() * row, 62);
  const std::vector<float> q = random_floats(b.tokens() * q_row, 63, -3.f, 3.f);
  const AttentionParams p{g.n_heads, 0.125f, 0};
  const KvScales scales{1.f / 448, 1.f / 448};  // amax 1 -> the full code range
  // History slots: both caches get the same values (fp32 ones and their codes), so only rounding differs.
  std::vector<float> kf = random_floats(b.shape.layer_elems(), 64), vf = random_floats(b.shape.layer_elems(), 65);
  std::vector<uint8_t> kc(kf.size()), vc(vf.size());
  quantize_fp8_static_ref(kc.data(), kf.data(), static_cast<int64_t>(kf.size()), scales.k);
  quantize_fp8_static_ref(vc.data(), vf.data(), static_cast<int64_t>(vf.size()), scales.v);
  std::vector<float> fp8(b.tokens() * q_row), fp32(fp8.size());
  attention_fp8_ref(fp8.data(), q.data(), k.data(), v.data(), kc.data(), vc.data(), b.batch(), b.shape, p, scales);
  attention_ref(fp32.data(), q.data(), k.data(), v.data(), kf.data(), vf.data(), b.batch(), b.shape, p);
  // e4m3 keeps 3 mantissa bits (relative error <= 1/16 per element): outputs in [-1, 1] move by a few
  // hundredths at worst, about 0.01 on average.
  EXPECT_EQ(compare_all(fp8, fp32, 0.1f, 0.f), "");
  double mean = 0;
  for (size_t i = 0; i < fp8.size(); ++i) mean += std::fabs(fp8[i] - fp32[i]) / fp8.size();
  EXPECT_LT(mean, 0.015);
  EXPECT_GT(mean, 0.0);  // and it is quantized
}

}  // namespace
}  // namespace conveyor
