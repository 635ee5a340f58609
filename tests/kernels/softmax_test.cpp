// Tests softmax_ref, log_softmax_ref and argmax_ref against double-precision formulas, with logits
// large enough that a version without max subtraction would overflow.
#include "kernels/cpu/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

std::vector<float> naive_log_softmax(const std::vector<float>& x) {
  double m = -INFINITY, s = 0;
  for (float v : x) m = std::max(m, double(v));
  for (float v : x) s += std::exp(v - m);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] - m - std::log(s));
  return out;
}

TEST(SoftmaxRef, MatchesFormula) {
  for (int n : {1, 3, 1000, 49152}) {
    auto x = random_floats(n, n, -40.f, 120.f);
    auto logp = naive_log_softmax(x);
    std::vector<float> want(n), got(n);
    for (int i = 0; i < n; ++i) want[i] = std::exp(logp[i]);
    softmax_ref(got.data(), x.data(), n);
    EXPECT_EQ(compare_all(got, want, 1e-9f, 1e-5f), "") << "n " << n;
    double sum = 0;
    for (float p : got) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    log_softmax_ref(got.data(), x.data(), n);
    EXPECT_EQ(compare_all(got, logp, 1e-5f, 1e-6f), "") << "n " << n;
  }
}

TEST(SoftmaxRef, MaskedEntriesGetZeroAndInfiniteMaxIsRejected) {
  std::vector<float> x = {1.f, -INFINITY, 2.f}, out(3);
  softmax_ref(out.data(), x.data(), 3);
  EXPECT_EQ(out[1], 0.f);
  EXPECT_NEAR(out[0] + out[2], 1.f, 1e-6f);
  std::vector<float> bad = {1.f, INFINITY};
  EXPECT_THROW(softmax_ref(out.data(), bad.data(), 2), Error);
  std::vector<float> all_masked = {-INFINITY, -INFINITY};
  EXPECT_THROW(log_softmax_ref(out.data(), all_masked.data(), 2), Error);
}

TEST(ArgmaxRef, FirstMaximumAndNaNSkipped) {
  auto x = random_floats(5000, 3);
  x[4321] = 5.f;
  EXPECT_EQ(argmax_ref(x.data(), 5000), 4321);
  x[4000] = 5.f;
  EXPECT_EQ(argmax_ref(x.data(), 5000), 4000);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax_ref(x.data(), 5000), 4000);
  std::vector<float> nan2 = {NAN, NAN};
  EXPECT_EQ(argmax_ref(nan2.data(), 2), -1);
}

}  // namespace
}  // namespace conveyor
