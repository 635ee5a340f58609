// Softmax family (see softmax.h). Sums are accumulated in double: vocabularies reach 150k entries
// and this is the reference the fp32 GPU versions are measured against.
#include "kernels/cpu/softmax.h"

#include <cmath>
#include <limits>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

float max_of(const float* x, int n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace

void softmax_ref(float* out, const float* x, int n) {
  CONVEYOR_CHECK(n > 0, "softmax: empty input");
  const float m = max_of(x, n);
  CONVEYOR_CHECK(std::isfinite(m), "softmax: the largest input is ", m, "; logits must be finite");
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - m);
    out[i] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) out[i] *= inv;
}

void log_softmax_ref(float* out, const float* x, int n) {
  CONVEYOR_CHECK(n > 0, "log_softmax: empty input");
  const float m = max_of(x, n);
  CONVEYOR_CHECK(std::isfinite(m), "log_softmax: the largest input is ", m, "; logits must be finite");
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
  const float log_sum = static_cast<float>(std::log(sum));
  for (int i = 0; i < n; ++i) out[i] = (x[i] - m) - log_sum;
}

int32_t argmax_ref(const float* x, int n) {
  CONVEYOR_CHECK(n > 0, "argmax: empty input");
  int32_t best = -1;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace conveyor
