// Tests silu_mul_ref (fused gate|up rows) and silu_mul_split_ref against the formula in double.
#include "kernels/cpu/silu_mul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

float naive_silu_mul(float g, float u) { return static_cast<float>(g / (1.0 + std::exp(-double(g))) * u); }

TEST(SiluMulRef, FusedGateUpLayout) {
  for (int inter : {1, 5, 1536}) {
    const int tokens = 13;
    auto gate_up = random_floats(size_t(tokens) * 2 * inter, inter, -8.f, 8.f);
    std::vector<float> out(size_t(tokens) * inter), want(out.size());
    for (int t = 0; t < tokens; ++t)
      for (int i = 0; i < inter; ++i)
        want[t * inter + i] = naive_silu_mul(gate_up[t * 2 * inter + i], gate_up[t * 2 * inter + inter + i]);
    silu_mul_ref(out.data(), gate_up.data(), tokens, inter);
    EXPECT_EQ(compare_all(out, want, 1e-7f, 2e-6f), "") << "inter " << inter;
  }
}

TEST(SiluMulRef, SplitBuffersAndExtremes) {
  auto gate = random_floats(1000, 1, -30.f, 30.f);
  auto up = random_floats(1000, 2, -3.f, 3.f);
  gate[0] = -100.f;  // exp(100) overflows to inf in fp32: silu must still give -0, not NaN
  gate[1] = 100.f;
  std::vector<float> out(1000), want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = naive_silu_mul(gate[i], up[i]);
  silu_mul_split_ref(out.data(), gate.data(), up.data(), 1000);
  EXPECT_EQ(compare_all(out, want, 1e-7f, 2e-6f), "");
  silu_mul_split_ref(gate.data(), gate.data(), up.data(), 1000);  // in place
  EXPECT_EQ(compare_all(gate, want, 1e-7f, 2e-6f), "");
}

}  // namespace
}  // namespace conveyor
