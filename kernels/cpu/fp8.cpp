// FP8 E4M3 twin (see fp8.h). Encoding works on the fp32 bit pattern: normal values keep 3 of the 23
// mantissa bits with round-to-nearest-even on the 20 dropped bits (a carry moves the exponent, which
// is what the format wants); values under the smallest normal (2^-6) are multiples of 2^-9, so their
// code is x * 512 rounded to nearest even.
#include "kernels/cpu/fp8.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace conveyor {

uint8_t fp8_e4m3_from_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7f;                  // NaN
  if (mag > 0x43e00000u) return sign | 0x7e;           // above 448 (and inf): saturate
  if (mag < 0x3c800000u) {                             // below 2^-6: subnormal or zero
    float a;
    std::memcpy(&a, &mag, 4);
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));  // default mode: nearest even
  }
  const uint32_t rounded = (mag + 0x7ffffu + ((mag >> 20) & 1u)) >> 20;  // biased exp | 3 mantissa bits
  return sign | static_cast<uint8_t>(rounded - ((127u - 7u) << 3));
}

namespace {

float decode(uint8_t v) {
  const uint32_t exp = (v >> 3) & 0xfu, mant = v & 7u;
  if (exp == 0xf && mant == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? static_cast<float>(mant) / 512.0f
                             : std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  return (v & 0x80) ? -mag : mag;
}

}  // namespace

const float* fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = decode(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

float fp8_e4m3_to_float(uint8_t code) { return fp8_e4m3_table()[code]; }

float fp8_row_scale(float amax) {
  const float s = amax / kFp8E4M3Max;
  return s == 0.0f ? FLT_EPSILON : s;
}

namespace {

uint8_t encode_scaled(float x, float scale) {
  return fp8_e4m3_from_float(std::clamp(x / scale, -kFp8E4M3Max, kFp8E4M3Max));
}

}  // namespace

void quantize_rows_fp8_ref(uint8_t* q, float* scales, const float* x, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(xr[c]));
    const float s = fp8_row_scale(amax);
    scales[r] = s;
    for (int64_t c = 0; c < cols; ++c) q[r * cols + c] = encode_scaled(xr[c], s);
  }
}

void quantize_fp8_static_ref(uint8_t* q, const float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) q[i] = encode_scaled(x[i], scale);
}

void dequantize_rows_fp8_ref(float* out, const uint8_t* q, const float* scales, int64_t rows, int64_t cols) {
  const float* table = fp8_e4m3_table();
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scales ? scales[r] : 1.0f;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = table[q[r * cols + c]] * s;
  }
}

void matmul_fp8_ref(float* y, const uint8_t* a, const float* a_scale, const uint8_t* b, const float* b_scale,
                    const float* bias, int64_t m, int64_t n, int64_t k) {
  const float* table = fp8_e4m3_table();
#pragma omp parallel for schedule(static) if (m * n * k >= (1 << 20))
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc += table[a[i * k + kk]] * table[b[j * k + kk]];
      y[i * n + j] = acc * a_scale[i] * b_scale[j] + (bias ? bias[j] : 0.0f);
    }
}

void linear_fp8_ref(float* y, const float* x, const float* w_codes, const float* w_scale, float input_scale,
                    const float* bias, int tokens, int n, int k) {
  const size_t count = static_cast<size_t>(tokens) * k;
  std::vector<uint8_t> q(count);
  std::vector<float> x_scale(static_cast<size_t>(tokens), input_scale);
  if (input_scale > 0.0f) quantize_fp8_static_ref(q.data(), x, static_cast<int64_t>(count), input_scale);
  else quantize_rows_fp8_ref(q.data(), x_scale.data(), x, tokens, k);
  std::vector<float> xq(count);
  dequantize_rows_fp8_ref(xq.data(), q.data(), nullptr, tokens, k);
  matmul_ref(y, xq.data(), w_codes, nullptr, tokens, n, k);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < n; ++j) {
      float& v = y[static_cast<size_t>(t) * n + j];
      v = v * x_scale[t] * w_scale[j] + (bias ? bias[j] : 0.0f);
    }
}

}  // namespace conveyor
