// percentile against numpy.percentile's default (linear): known values, exact ranks of random samples
// (q = k / (n - 1) gives the k-th smallest), interpolation between neighbours, order independence.
#include "runtime/core/percentile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

TEST(Percentile, MatchesNumpyOnKnownValues) {
  // numpy.percentile([4, 1, 3, 2], [0, 10, 50, 90, 99, 100]) = 1, 1.3, 2.5, 3.7, 3.97, 4
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0.1), 1.3);
  EXPECT_DOUBLE_EQ(percentile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.9), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 0.99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(v, 1), 4.0);
  EXPECT_EQ(percentile({}, 0.5), 0.0);
  EXPECT_EQ(percentile({7.5}, 0.99), 7.5);
}

TEST(Percentile, RandomSamplesHitExactRanksAndInterpolateBetweenThem) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-100, 100);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> v(2 + rng() % 40);
    for (double& x : v) x = u(rng);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double n1 = static_cast<double>(v.size() - 1);
    // k / n1 * n1 may round just below k, leaving a 1e-16 share of the neighbour below.
    for (size_t k = 0; k < v.size(); ++k)
      EXPECT_NEAR(percentile(v, static_cast<double>(k) / n1), sorted[k], 1e-12) << "trial " << trial << " rank " << k;
    for (size_t k = 0; k + 1 < v.size(); ++k) {
      const double mid = percentile(v, (static_cast<double>(k) + 0.25) / n1);
      EXPECT_NEAR(mid, sorted[k] + 0.25 * (sorted[k + 1] - sorted[k]), 1e-9) << "trial " << trial << " gap " << k;
    }
    std::vector<double> shuffled = v;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    for (double q : {0.5, 0.9, 0.99}) EXPECT_EQ(percentile(shuffled, q), percentile(v, q));
  }
}

TEST(Percentile, RefusesAPercentInsteadOfAFraction) {
  EXPECT_THROW(percentile({1, 2}, 50), Error);
  EXPECT_THROW(percentile({1, 2}, -0.1), Error);
}

}  // namespace
}  // namespace conveyor
