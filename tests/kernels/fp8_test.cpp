// The e4m3 twin: every code decodes to its definition and re-encodes to itself, exact ties between
// neighbours go to the even code, out-of-range values saturate, NaN stays NaN; encoding random values
// equals a brute-force nearest-code search; row quantization and the FP8 GEMM twins equal a
// dequantize-then-fp32 reference on random matrices.
#include "kernels/cpu/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

float definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return static_cast<float>(s ? -mag : mag);
}

bool is_nan_code(int code) { return (code & 0x7f) == 0x7f; }

TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_EQ(fp8_e4m3_from_float(v), 0x7f) << c;
      continue;
    }
    EXPECT_EQ(v, definition(c)) << "code " << c;
    // -0 (0x80) encodes back to itself: the sign bit survives.
    EXPECT_EQ(fp8_e4m3_from_float(v), c) << "code " << c << " value " << v;
  }
}

TEST(Fp8E4M3, TiesGoToEven) {
  // Midpoints between neighbouring positive codes (0..126): each must round to the even code.
  for (int c = 0; c < 126; ++c) {
    const float mid = 0.5f * (definition(c) + definition(c + 1));  // exact in fp32
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(fp8_e4m3_from_float(mid), even) << "between " << c << " and " << c + 1;
    EXPECT_EQ(fp8_e4m3_from_float(-mid), 0x80 | even) << "negative, between " << c << " and " << c + 1;
    // Just off the midpoint goes to the nearer code.
    EXPECT_EQ(fp8_e4m3_from_float(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(fp8_e4m3_from_float(std::nextafter(mid, 1e9f)), c + 1);
  }
}

TEST(Fp8E4M3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(fp8_e4m3_from_float(448.0f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_float(460.0f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_float(1e30f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_float(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_float(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(fp8_e4m3_from_float(-1e30f), 0xfe);
  EXPECT_EQ(fp8_e4m3_from_float(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(fp8_e4m3_from_float(1e-30f), 0x00);   // underflow to zero
  EXPECT_EQ(fp8_e4m3_from_float(-1e-30f), 0x80);  // keeps its sign
  EXPECT_EQ(fp8_e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: tie to 0
}

TEST(Fp8E4M3, RandomValuesEncodeToNearestCode) {
  std::vector<float> x = random_floats(20000, 7, -500.f, 500.f);
  std::vector<float> small = random_floats(20000, 8, -0.05f, 0.05f);
  x.insert(x.end(), small.begin(), small.end());
  for (float v : x) {
    int best = -1;
    double best_err = 1e300;
    for (int c = 0; c < 256; ++c) {
      if (is_nan_code(c)) continue;
      const double err = std::fabs(static_cast<double>(definition(c)) - std::min(std::fabs(v), 448.0f) *
                                                                           (v < 0 ? -1.0 : 1.0));
      if (err < best_err || (err == best_err && (c & 1) == 0 && (c & 0x80) == ((v < 0) ? 0x80 : 0))) {
        best = c;
        best_err = err;
      }
    }
    const uint8_t got = fp8_e4m3_from_float(v);
    ASSERT_EQ(definition(got), definition(best)) << "value " << v;
  }
}

TEST(Fp8Quantize, RowsUseAmaxOver448) {
  const int rows = 7, cols = 33;
  std::vector<float> x = random_floats(rows * cols, 11, -3.f, 3.f);
  for (int c = 0; c < cols; ++c) x[2 * cols + c] = 0.0f;  // an all-zero row gets fp32 epsilon
  std::vector<uint8_t> q(rows * cols);
  std::vector<float> s(rows);
  quantize_rows_fp8_ref(q.data(), s.data(), x.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    float amax = 0.f;
    for (int c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
    EXPECT_EQ(s[r], amax == 0.f ? std::numeric_limits<float>::epsilon() : amax / 448.0f) << r;
    for (int c = 0; c < cols; ++c) {
      EXPECT_EQ(q[r * cols + c], fp8_e4m3_from_float(x[r * cols + c] / s[r])) << r << "," << c;
      // Quantization error is at most half a code step: 2^-4 relative for normal codes.
      const float back = fp8_e4m3_to_float(q[r * cols + c]) * s[r];
      EXPECT_LE(std::fabs(back - x[r * cols + c]), std::fabs(x[r * cols + c]) / 16 + s[r] / 512) << r << "," << c;
    }
  }
  std::vector<uint8_t> qs(cols);
  quantize_fp8_static_ref(qs.data(), x.data(), cols, 0.001f);  // values up to 3000: saturate
  for (int c = 0; c < cols; ++c)
    EXPECT_EQ(fp8_e4m3_to_float(qs[c]), fp8_e4m3_to_float(fp8_e4m3_from_float(std::clamp(x[c] / 0.001f, -448.f, 448.f))));
}

// y = dequant(a) dequant(b)^T + bias in fp64: the reference both GEMM twins must meet.
std::vector<float> dequant_reference(const std::vector<uint8_t>& a, const std::vector<float>& as,
                                     const std::vector<uint8_t>& b, const std::vector<float>& bs,
                                     const std::vector<float>& bias, int m, int n, int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = bias[j];
      for (int kk = 0; kk < k; ++kk)
        acc += double(fp8_e4m3_to_float(a[i * k + kk]) * as[i]) * double(fp8_e4m3_to_float(b[j * k + kk]) * bs[j]);
      y[i * n + j] = static_cast<float>(acc);
    }
  return y;
}

TEST(Fp8Matmul, TwinsMatchDequantizedReference) {
  for (auto [m, n, k] : {std::tuple{1, 17, 64}, std::tuple{5, 33, 96}, std::tuple{16, 64, 576}}) {
    std::vector<float> x = random_floats(size_t(m) * k, 20 + m, -4.f, 4.f);
    std::vector<float> w = random_floats(size_t(n) * k, 30 + n, -0.2f, 0.2f);
    std::vector<float> bias = random_floats(n, 40 + k);
    std::vector<uint8_t> xq(x.size()), wq(w.size());
    std::vector<float> xs(m), ws(n);
    quantize_rows_fp8_ref(xq.data(), xs.data(), x.data(), m, k);
    quantize_rows_fp8_ref(wq.data(), ws.data(), w.data(), n, k);
    const std::vector<float> want = dequant_reference(xq, xs, wq, ws, bias, m, n, k);
    std::vector<float> got(size_t(m) * n);
    matmul_fp8_ref(got.data(), xq.data(), xs.data(), wq.data(), ws.data(), bias.data(), m, n, k);
    // fp32 accumulation of k exact products of size <= |x|max |w|max: error ~ sqrt(k) ulp of the sum.
    const float atol = 2e-6f * std::sqrt(float(k)) * 4.f * 0.2f;
    EXPECT_EQ(compare_all(got, want, atol, 1e-5f), "") << m << "x" << n << "x" << k;
    // The CPU backend's path: decoded weight codes, per-token quantization inside.
    std::vector<float> w_codes(w.size());
    dequantize_rows_fp8_ref(w_codes.data(), wq.data(), nullptr, n, k);
    std::vector<float> lin(size_t(m) * n);
    linear_fp8_ref(lin.data(), x.data(), w_codes.data(), ws.data(), 0.f, bias.data(), m, n, k);
    EXPECT_EQ(compare_all(lin, want, atol, 1e-5f), "") << "linear " << m << "x" << n << "x" << k;
  }
}

TEST(Fp8Matmul, StaticInputScale) {
  const int m = 3, n = 9, k = 40;
  const float input_scale = 0.02f;
  std::vector<float> x = random_floats(size_t(m) * k, 51, -6.f, 6.f);
  std::vector<float> w = random_floats(size_t(n) * k, 52, -1.f, 1.f);
  std::vector<float> bias(n, 0.f);
  std::vector<uint8_t> xq(x.size()), wq(w.size());
  std::vector<float> xs(m, input_scale), ws(n);
  quantize_fp8_static_ref(xq.data(), x.data(), static_cast<int64_t>(x.size()), input_scale);
  quantize_rows_fp8_ref(wq.data(), ws.data(), w.data(), n, k);
  std::vector<float> w_codes(w.size());
  dequantize_rows_fp8_ref(w_codes.data(), wq.data(), nullptr, n, k);
  std::vector<float> lin(size_t(m) * n);
  linear_fp8_ref(lin.data(), x.data(), w_codes.data(), ws.data(), input_scale, nullptr, m, n, k);
  EXPECT_EQ(compare_all(lin, dequant_reference(xq, xs, wq, ws, bias, m, n, k), 1e-4f, 1e-5f), "");
}

}  // namespace
}  // namespace conveyor
