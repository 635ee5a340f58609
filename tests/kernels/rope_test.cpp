// Tests RopeTable against inv_freq values printed by transformers 5.24 (ROPE_INIT_FUNCTIONS[type]
// on a LlamaConfig with head_dim 32, parameters as in each test), and rope_ref against the
// rotate_half formula in double, plus the property RoPE exists for: q.k depends on p_q - p_k only.
#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

std::vector<float> table_inv_freq(const RopeTable& t, int seq_len) {
  std::vector<float> f(t.head_dim() / 2);
  t.inv_freq_for(seq_len, f.data());
  return f;
}

TEST(RopeTable, DefaultMatchesFormula) {
  RopeTable t(64, 10000.0, RopeFreqScaling{}, 2048);
  std::vector<float> want(32);
  for (int i = 0; i < 32; ++i) want[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / 64));
  EXPECT_EQ(compare_all(table_inv_freq(t, 1), want, 0.f, 2e-7f), "");
  EXPECT_EQ(compare_all(t.static_inv_freq(), want, 0.f, 2e-7f), "");
}

TEST(RopeTable, Llama3MatchesTransformers) {
  // rope_theta 500000, factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position 64.
  RopeFreqScaling s{RopeFreqType::kLlama3, 8.f, 1.f, 4.f, 64};
  RopeTable t(32, 500000.0, s, 256);
  const std::vector<float> want = {1, 0.440366626f, 0.079403013f, 0.0106746377f, 0.00470075384f, 0.00207005511f,
                                   0.000911583134f, 0.000401430763f, 0.000176776681f, 7.78465546e-05f,
                                   3.42810235e-05f, 1.50962178e-05f, 6.64786967e-06f, 2.92749974e-06f,
                                   1.28917316e-06f, 5.6770881e-07f};
  EXPECT_EQ(compare_all(table_inv_freq(t, 1), want, 0.f, 1e-6f), "");
}

TEST(RopeTable, LinearMatchesTransformers) {
  RopeTable t(32, 10000.0, RopeFreqScaling{RopeFreqType::kLinear, 4.f}, 256);
  const std::vector<float> want = {0.25f, 0.140585333f, 0.079056941f, 0.0444569848f, 0.0250000004f,
                                   0.0140585322f, 0.00790569466f, 0.00444569858f, 0.00249999994f,
                                   0.00140585331f, 0.000790569466f, 0.000444569858f, 0.000250000012f,
                                   0.000140585325f, 7.90569466e-05f, 4.44569851e-05f};
  EXPECT_EQ(compare_all(table_inv_freq(t, 1), want, 0.f, 1e-6f), "");
}

TEST(RopeTable, DynamicMatchesTransformers) {
  // factor 2, max_position_embeddings 64: unscaled up to seq_len 64, NTK-scaled base beyond.
  RopeTable t(32, 10000.0, RopeFreqScaling{RopeFreqType::kDynamic, 2.f}, 64);
  const std::vector<float> at_50 = {1, 0.562341332f, 0.316227764f, 0.177827939f, 0.100000001f, 0.0562341288f,
                                    0.0316227786f, 0.0177827943f, 0.00999999978f, 0.00562341325f,
                                    0.00316227786f, 0.00177827943f, 0.00100000005f, 0.000562341302f,
                                    0.000316227786f, 0.00017782794f};
  const std::vector<float> at_100 = {1, 0.534781158f, 0.285990834f, 0.152942508f, 0.0817907676f, 0.043740157f,
                                     0.0233914126f, 0.0125092845f, 0.0066897301f, 0.00357754086f,
                                     0.00191320153f, 0.00102314411f, 0.000547158124f, 0.000292609853f,
                                     0.000156482216f, 8.36837353e-05f};
  EXPECT_EQ(compare_all(table_inv_freq(t, 50), at_50, 0.f, 1e-6f), "");
  EXPECT_EQ(compare_all(table_inv_freq(t, 64), at_50, 0.f, 1e-6f), "");
  EXPECT_EQ(compare_all(table_inv_freq(t, 100), at_100, 0.f, 2e-6f), "");
}

TEST(RopeTable, RejectsBadParameters) {
  EXPECT_THROW(RopeTable(63, 10000.0, RopeFreqScaling{}, 128), Error);
  EXPECT_THROW(RopeTable(64, 0.0, RopeFreqScaling{}, 128), Error);
  EXPECT_THROW(RopeTable(64, 1e4, RopeFreqScaling{RopeFreqType::kLlama3, 8.f, 4.f, 1.f, 8192}, 128), Error);
  EXPECT_THROW(RopeTable(64, 1e4, RopeFreqScaling{RopeFreqType::kLinear, 0.f}, 128), Error);
}

// rotate_half in double with inv_freq taken from the table.
void naive_rope(std::vector<float>& x, const std::vector<int32_t>& pos, int heads, int d, const float* inv_freq) {
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < heads; ++h) {
      float* v = x.data() + (t * heads + h) * d;
      for (int i = 0; i < d / 2; ++i) {
        const double a = double(float(pos[t]) * inv_freq[i]);
        const double x1 = v[i], x2 = v[i + d / 2];
        v[i] = static_cast<float>(x1 * std::cos(a) - x2 * std::sin(a));
        v[i + d / 2] = static_cast<float>(x2 * std::cos(a) + x1 * std::sin(a));
      }
    }
}

void check_rope(const RopeTable& table, int heads, int kv_heads, const std::vector<int32_t>& pos, uint64_t seed) {
  const int d = table.head_dim();
  const int tokens = static_cast<int>(pos.size());
  auto q = random_floats(size_t(tokens) * heads * d, seed);
  auto k = random_floats(size_t(tokens) * kv_heads * d, seed + 1);
  auto q_want = q, k_want = k;
  int max_pos = 0;
  for (int p : pos) max_pos = std::max(max_pos, p);
  auto inv = table_inv_freq(table, max_pos + 1);
  naive_rope(q_want, pos, heads, d, inv.data());
  naive_rope(k_want, pos, kv_heads, d, inv.data());
  rope_ref(q.data(), k.data(), pos.data(), tokens, heads, kv_heads, table);
  EXPECT_EQ(compare_all(q, q_want, 1e-6f, 1e-6f), "") << "q, head_dim " << d;
  EXPECT_EQ(compare_all(k, k_want, 1e-6f, 1e-6f), "") << "k, head_dim " << d;
}

TEST(RopeRef, MatchesRotateHalfFormula) {
  const std::vector<int32_t> pos = {0, 1, 2, 7, 31, 100, 4095, 131071, 5, 5};
  check_rope(RopeTable(64, 10000.0, RopeFreqScaling{}, 2048), 9, 3, pos, 1);
  check_rope(RopeTable(128, 500000.0, RopeFreqScaling{RopeFreqType::kLlama3, 8.f, 1.f, 4.f, 8192}, 131072), 4, 1, pos,
             2);
  check_rope(RopeTable(80, 1e6, RopeFreqScaling{RopeFreqType::kLinear, 2.f}, 4096), 2, 2, pos, 3);
  check_rope(RopeTable(64, 10000.0, RopeFreqScaling{RopeFreqType::kDynamic, 4.f}, 64), 3, 3, pos, 4);
}

TEST(RopeRef, DynamicSeqLenOverridesTheCallsLongestPosition) {
  // A chunk of positions 0..9 of a 100-token prompt must use the scaling of the whole prompt.
  RopeTable table(32, 10000.0, RopeFreqScaling{RopeFreqType::kDynamic, 2.f}, 64);
  std::vector<int32_t> pos(10);
  for (int i = 0; i < 10; ++i) pos[i] = i;
  auto q = random_floats(10 * 32, 13), k = random_floats(10 * 32, 14);
  auto q_want = q, k_want = k;
  auto inv = table_inv_freq(table, 100);
  naive_rope(q_want, pos, 1, 32, inv.data());
  naive_rope(k_want, pos, 1, 32, inv.data());
  rope_ref(q.data(), k.data(), pos.data(), 10, 1, 1, table, 100);
  EXPECT_EQ(compare_all(q, q_want, 1e-6f, 1e-6f), "");
  EXPECT_EQ(compare_all(k, k_want, 1e-6f, 1e-6f), "");
  ASSERT_NE(table_inv_freq(table, 100)[1], table_inv_freq(table, 10)[1]);  // the override matters
}

TEST(RopeRef, PositionZeroIsIdentity) {
  RopeTable table(32, 10000.0, RopeFreqScaling{}, 128);
  auto q = random_floats(2 * 32, 9), k = random_floats(32, 10);
  auto q0 = q, k0 = k;
  const int32_t pos = 0;
  rope_ref(q.data(), k.data(), &pos, 1, 2, 1, table);
  EXPECT_EQ(compare_all(q, q0, 0.f, 0.f), "");
  EXPECT_EQ(compare_all(k, k0, 0.f, 0.f), "");
}

TEST(RopeRef, ScoreDependsOnRelativePositionOnly) {
  RopeTable table(64, 10000.0, RopeFreqScaling{}, 4096);
  const auto q = random_floats(64, 11), k = random_floats(64, 12);
  auto score = [&](int pq, int pk) {
    auto qq = q, kq = k, qk = q, kk = k;  // rotate q at pq and k at pk (each call rotates both)
    rope_ref(qq.data(), kq.data(), &pq, 1, 1, 1, table);
    rope_ref(qk.data(), kk.data(), &pk, 1, 1, 1, table);
    double s = 0;
    for (int i = 0; i < 64; ++i) s += double(qq[i]) * kk[i];
    return s;
  };
  const double base = score(10, 3);
  EXPECT_NEAR(score(17, 10), base, 1e-4);
  EXPECT_NEAR(score(1007, 1000), base, 1e-3);
}

}  // namespace
}  // namespace conveyor
