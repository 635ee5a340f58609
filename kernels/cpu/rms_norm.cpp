// RMSNorm reference (see rms_norm.h). The sum of squares is accumulated in double: this is the spec,
// so it should be closer to the exact value than any fp32 implementation tested against it.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

void normalise_row(float* out, const float* x, const float* weight, int hidden, float eps) {
  double sum_sq = 0.0;
  for (int i = 0; i < hidden; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / hidden + static_cast<double>(eps)));
  for (int i = 0; i < hidden; ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

void check_shape(int tokens, int hidden, float eps) {
  CONVEYOR_CHECK(tokens >= 0 && hidden > 0, "rms_norm: bad shape tokens=", tokens, " hidden=", hidden);
  CONVEYOR_CHECK(eps >= 0.f, "rms_norm: eps must be >= 0, got ", eps);
}

}  // namespace

void rms_norm_ref(float* out, const float* x, const float* weight, int tokens, int hidden, float eps) {
  check_shape(tokens, hidden, eps);
#pragma omp parallel for schedule(static) if (tokens > 8)
  for (int t = 0; t < tokens; ++t) {
    const size_t off = static_cast<size_t>(t) * hidden;
    normalise_row(out + off, x + off, weight, hidden, eps);
  }
}

}  // namespace conveyor
