// Tests matmul_ref against a double-precision triple loop over shapes that hit every tile edge,
// with and without bias, plus the projection shapes of SmolLM2-135M.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

// Returns the reference and, through abs_sum, sum |x||w| per element for the error bound.
std::vector<float> naive(const std::vector<float>& x, const std::vector<float>& w, const float* bias, int tokens,
                         int n, int k) {
  std::vector<float> y(static_cast<size_t>(tokens) * n);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < n; ++j) {
      double s = bias ? bias[j] : 0.0;
      for (int kk = 0; kk < k; ++kk) s += double(x[size_t(t) * k + kk]) * w[size_t(j) * k + kk];
      y[size_t(t) * n + j] = static_cast<float>(s);
    }
  return y;
}

void check(int tokens, int n, int k, bool with_bias, uint64_t seed) {
  auto x = random_floats(static_cast<size_t>(tokens) * k, seed);
  auto w = random_floats(static_cast<size_t>(n) * k, seed + 1);
  auto b = random_floats(n, seed + 2);
  const float* bias = with_bias ? b.data() : nullptr;
  std::vector<float> y(static_cast<size_t>(tokens) * n, 123.f);
  matmul_ref(y.data(), x.data(), w.data(), bias, tokens, n, k);
  // fp32 accumulation of k products of magnitude <= 1: error grows like sqrt(k) * eps.
  const float atol = 2e-6f * std::sqrt(static_cast<float>(k)) + 1e-6f;
  EXPECT_EQ(compare_all(y, naive(x, w, bias, tokens, n, k), atol, 1e-6f), "")
      << "tokens " << tokens << " n " << n << " k " << k << " bias " << with_bias;
}

TEST(MatmulRef, TileEdges) {
  uint64_t seed = 100;
  for (int tokens : {1, 2, 3, 4, 5, 9})
    for (int n : {1, 3, 4, 7, 16, 17, 33})
      for (int k : {1, 7, 8, 9, 31, 64})
        for (bool bias : {false, true}) check(tokens, n, k, bias, seed += 3);
}

TEST(MatmulRef, DecodeAndPrefillShapes) {
  // SmolLM2-135M: hidden 576, 9 heads x 64, 3 KV heads, intermediate 1536.
  check(1, 576, 576, false, 1);
  check(1, 2 * 1536, 576, false, 2);
  check(1, 576, 1536, false, 3);
  check(37, 576 + 2 * 192, 576, true, 4);
  check(64, 1536, 576, false, 5);
  check(3, 4000, 576, false, 6);  // an LM-head slice
}

TEST(MatmulRef, ZeroTokensIsANoOp) {
  std::vector<float> w = random_floats(12, 1);
  EXPECT_NO_THROW(matmul_ref(nullptr, nullptr, w.data(), nullptr, 0, 3, 4));
  // With real buffers behind them, zero tokens must leave out untouched (and w, bias unread).
  const std::vector<float> sentinel = random_floats(3, 2);
  std::vector<float> out = sentinel, x = random_floats(4, 3), bias = random_floats(3, 4);
  matmul_ref(out.data(), x.data(), w.data(), bias.data(), 0, 3, 4);
  EXPECT_EQ(compare_all(out, sentinel, 0.f, 0.f), "");
}

}  // namespace
}  // namespace conveyor
