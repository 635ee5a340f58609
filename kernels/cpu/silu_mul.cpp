// SwiGLU reference (see silu_mul.h). exp is taken in fp32 as the reference framework does.
#include "kernels/cpu/silu_mul.h"

#include <cmath>
#include <cstddef>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

inline float silu(float x) { return x / (1.f + std::exp(-x)); }

}  // namespace

void silu_mul_ref(float* out, const float* gate_up, int tokens, int inter) {
  CONVEYOR_CHECK(tokens >= 0 && inter > 0, "silu_mul: bad shape tokens=", tokens, " inter=", inter);
#pragma omp parallel for schedule(static) if (static_cast<long long>(tokens) * inter > 65536)
  for (int t = 0; t < tokens; ++t) {
    const float* gate = gate_up + static_cast<size_t>(t) * 2 * inter;
    const float* up = gate + inter;
    float* o = out + static_cast<size_t>(t) * inter;
    for (int i = 0; i < inter; ++i) o[i] = silu(gate[i]) * up[i];
  }
}

void silu_mul_split_ref(float* out, const float* gate, const float* up, long long n) {
  CONVEYOR_CHECK(n >= 0, "silu_mul: negative size ", n);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (long long i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

}  // namespace conveyor
