// Element-wise additions (see add.h). Trivially memory-bound; threads only for large inputs.
#include "kernels/cpu/add.h"

#include <cmath>
#include <cstddef>

#include "runtime/core/error.h"

namespace conveyor {

void add_ref(float* out, const float* a, const float* b, long long n) {
  CONVEYOR_CHECK(n >= 0, "add: negative size ", n);
#pragma omp parallel for schedule(static) if (n > (1 << 18))
  for (long long i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void add_inplace_ref(float* acc, const float* x, long long n) { add_ref(acc, acc, x, n); }

void add_bias_ref(float* x, const float* bias, int rows, int cols) {
  CONVEYOR_CHECK(rows >= 0 && cols > 0, "add_bias: bad shape rows=", rows, " cols=", cols);
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

float abs_max_cols_ref(const float* x, long long rows, long long width, long long col, long long cols) {
  CONVEYOR_CHECK(rows >= 0 && cols >= 0 && col >= 0 && col + cols <= width, "abs_max_cols: columns [", col, ", +",
                 cols, ") of a width of ", width);
  float m = 0.f;
  for (long long r = 0; r < rows; ++r)
    for (long long c = col; c < col + cols; ++c) {
      const float a = std::fabs(x[r * width + c]);
      if (a > m) m = a;  // false for NaN
    }
  return m;
}

}  // namespace conveyor
