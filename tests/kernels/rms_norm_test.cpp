// Tests rms_norm_ref against the formula evaluated in double.
#include "kernels/cpu/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

std::vector<float> naive_rms_norm(const std::vector<float>& x, const std::vector<float>& w, int tokens, int hidden,
                                  float eps) {
  std::vector<float> out(x.size());
  for (int t = 0; t < tokens; ++t) {
    double ss = 0;
    for (int i = 0; i < hidden; ++i) ss += double(x[t * hidden + i]) * x[t * hidden + i];
    const double inv = 1.0 / std::sqrt(ss / hidden + eps);
    for (int i = 0; i < hidden; ++i) out[t * hidden + i] = static_cast<float>(w[i] * (x[t * hidden + i] * inv));
  }
  return out;
}

TEST(RmsNormRef, MatchesFormula) {
  for (int hidden : {1, 7, 64, 576, 4096}) {
    const int tokens = 19;
    const float eps = 1e-5f;
    auto x = random_floats(static_cast<size_t>(tokens) * hidden, 10 + hidden, -3.f, 3.f);
    auto w = random_floats(hidden, 20 + hidden, 0.5f, 1.5f);
    std::vector<float> out(x.size());
    rms_norm_ref(out.data(), x.data(), w.data(), tokens, hidden, eps);
    EXPECT_EQ(compare_all(out, naive_rms_norm(x, w, tokens, hidden, eps), 1e-6f, 1e-6f), "") << "hidden " << hidden;
  }
}

TEST(RmsNormRef, InPlace) {
  const int tokens = 5, hidden = 33;
  auto x = random_floats(tokens * hidden, 1);
  auto w = random_floats(hidden, 2);
  auto want = naive_rms_norm(x, w, tokens, hidden, 1e-6f);
  rms_norm_ref(x.data(), x.data(), w.data(), tokens, hidden, 1e-6f);
  EXPECT_EQ(compare_all(x, want, 1e-6f, 1e-6f), "");
}

TEST(RmsNormRef, EpsDominatesTinyInputs) {
  const int hidden = 16;
  auto x = random_floats(hidden, 3, -1e-4f, 1e-4f);
  auto w = random_floats(hidden, 4);
  std::vector<float> out(hidden);
  rms_norm_ref(out.data(), x.data(), w.data(), 1, hidden, 1e-2f);
  EXPECT_EQ(compare_all(out, naive_rms_norm(x, w, 1, hidden, 1e-2f), 1e-9f, 1e-6f), "");
}

}  // namespace
}  // namespace conveyor
