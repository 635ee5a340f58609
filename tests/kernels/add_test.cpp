// Tests add_ref, add_inplace_ref and add_bias_ref: exact, since each is a single fp32 addition.
#include "kernels/cpu/add.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

TEST(AddRef, ElementwiseInPlaceAndBias) {
  const int rows = 7, cols = 300;
  auto a = random_floats(rows * cols, 1), b = random_floats(rows * cols, 2), bias = random_floats(cols, 3);
  std::vector<float> out(a.size()), want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];
  add_ref(out.data(), a.data(), b.data(), static_cast<long long>(a.size()));
  EXPECT_EQ(compare_all(out, want, 0.f, 0.f), "");
  add_inplace_ref(a.data(), b.data(), static_cast<long long>(a.size()));
  EXPECT_EQ(compare_all(a, want, 0.f, 0.f), "");
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[r * cols + c] += bias[c];
  add_bias_ref(a.data(), bias.data(), rows, cols);
  EXPECT_EQ(compare_all(a, want, 0.f, 0.f), "");
}

}  // namespace
}  // namespace conveyor
