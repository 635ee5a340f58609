// The FP8 GPU kernels against their CPU twins (kernels/cpu/fp8.h), every element checked:
// quantization (dynamic per-row and static) gives bit-identical codes and scales on random bf16/f16/f32
// inputs and on every tie and saturation case; the cuBLASLt e4m3 GEMM plus the scale epilogue equals
// matmul_fp8_ref within 2^-12 of sum_k |a b| (Hopper's FP8 accumulator) plus one output rounding for
// bf16/f16, with bias and accumulating into a prior output; so does the small-m FP8 gemv kernel
// (m <= 16, tails in n and k), and Fp8GemmRunner's race between the two decides per shape. The fused
// run_scaled (scales, bias and residual in cuBLASLt's epilogue) is held to the same bound and must run
// on Hopper; many-row quantization (the vectorized kernel and its fallback) is bit-identical too.
#include "kernels/cuda/fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/fp8.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::download;
using testing::download_codes;
using testing::random_floats;
using testing::round_all;
using testing::TestBuffer;
using testing::upload;
using testing::upload_codes;

// Dynamic or static quantization of x on the GPU; codes and scales compared bit for bit.
void check_quantize(const std::vector<float>& x_in, int64_t rows, int64_t cols, DType dt, float static_scale) {
  const std::vector<float> x = round_all(x_in, dt);
  std::vector<uint8_t> want(x.size());
  std::vector<float> want_scale(static_cast<size_t>(rows), static_scale);
  if (static_scale > 0) quantize_fp8_static_ref(want.data(), x.data(), static_cast<int64_t>(x.size()), static_scale);
  else quantize_rows_fp8_ref(want.data(), want_scale.data(), x.data(), rows, cols);
  TestBuffer dx = upload(x, dt), dq(x.size()), ds(static_cast<size_t>(rows) * 4);
  quantize_rows_fp8_cuda(static_cast<uint8_t*>(dq.get()), static_cast<float*>(ds.get()), dx.get(), dt, rows, cols,
                         static_scale, nullptr);
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint8_t> got = download_codes(dq, x.size());
  EXPECT_EQ(compare_all(download(ds.get(), static_cast<size_t>(rows), DType::kF32), want_scale, 0.f, 0.f), "");
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(static_cast<int>(got[i]), static_cast<int>(want[i]))
        << "first mismatch at element " << i << " (x = " << x[i] << ", " << dtype_name(dt) << ")";
}

TEST(Fp8Gpu, QuantizeRowsEqualsTwin) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    // Rows up to 64 of up to 16,384 columns take the kernel that holds a row in registers (14,336: the
    // 8B MLP's down input); 100 rows, or 20,000 columns, the two-pass one.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 64}, {7, 576}, {33, 4096}, {5, 1000}, {1, 14336},
                              {3, 16384}, {100, 576}, {2, 20000}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const auto x = random_floats(static_cast<size_t>(rows * cols), rows * 131 + cols, -8.f, 8.f);
      check_quantize(x, rows, cols, dt, 0.f);
      check_quantize(random_floats(static_cast<size_t>(rows * cols), rows * 17 + cols, -8.f, 8.f), rows, cols, dt,
                     0.01f);  // values up to 800: saturation included
    }
}

TEST(Fp8Gpu, QuantizeManyRowsEqualsTwin) {
  // Over 64 rows, widths that are multiples of 8 (up to 32,768: 70B's 28,672 included) take the kernel
  // holding 16-byte packs in registers; 1,004 columns the two-pass fallback. Row 7 is all zeros: its
  // scale is fp32 epsilon and its codes zero.
  const std::pair<int64_t, int64_t> shapes[] = {{65, 4096}, {1000, 4096}, {9000, 4096}, {65, 14336}, {777, 14336},
                                                {9000, 14336}, {65, 784}, {4097, 784}, {9000, 784}, {65, 28672},
                                                {300, 28672}, {65, 1004}, {300, 1004}};
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (auto [rows, cols] : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), rows * 7 + cols, -8.f, 8.f);
      std::fill(x.begin() + 7 * cols, x.begin() + 8 * cols, 0.f);
      check_quantize(x, rows, cols, dt, 0.f);
      if (rows == 65) check_quantize(x, rows, cols, dt, 0.01f);  // the static scale through the same kernel
    }
}

TEST(Fp8Gpu, EncodingTiesSaturationAndNaNEqualTwin) {
  // Every midpoint between neighbouring codes, each code value, its neighbours, huge values and NaN,
  // quantized with scale 1 in fp32: bit-identical codes.
  std::vector<float> x;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    x.insert(x.end(), {v, std::nextafter(v, 1e9f), std::nextafter(v, -1e9f)});
    if ((c & 0x7f) < 0x7e) x.push_back(0.5f * (v + fp8_e4m3_to_float(static_cast<uint8_t>(c + 1))));
  }
  x.insert(x.end(), {1e30f, -1e30f, 500.f, -464.f, 1e-30f, -1e-30f, std::nanf("")});
  x.resize((x.size() + 15) / 16 * 16, 0.25f);
  check_quantize(x, 1, static_cast<int64_t>(x.size()), DType::kF32, 1.0f);
}

struct GemmCase {
  int64_t m, n, k;
};

// The linear through cuBLASLt plus the epilogue, or (gemv) through fp8_gemv_cuda.
void check_gemm(GemmCase s, DType out, bool with_bias, bool accumulate, bool gemv = false) {
  SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " -> " +
               dtype_name(out) + (with_bias ? " bias" : "") + (accumulate ? " acc" : "") + (gemv ? " gemv" : ""));
  const uint64_t seed = static_cast<uint64_t>(s.m * 7 + s.n * 13 + s.k);
  const auto x = random_floats(static_cast<size_t>(s.m * s.k), seed, -3.f, 3.f);
  const auto w = random_floats(static_cast<size_t>(s.n * s.k), seed + 1, -0.1f, 0.1f);
  const auto bias = round_all(random_floats(static_cast<size_t>(s.n), seed + 2), out);
  const auto y0 = round_all(random_floats(static_cast<size_t>(s.m * s.n), seed + 3), out);
  std::vector<uint8_t> xq(x.size()), wq(w.size());
  std::vector<float> xs(static_cast<size_t>(s.m)), ws(static_cast<size_t>(s.n));
  quantize_rows_fp8_ref(xq.data(), xs.data(), x.data(), s.m, s.k);
  quantize_rows_fp8_ref(wq.data(), ws.data(), w.data(), s.n, s.k);
  std::vector<float> want(static_cast<size_t>(s.m * s.n));
  matmul_fp8_ref(want.data(), xq.data(), xs.data(), wq.data(), ws.data(), with_bias ? bias.data() : nullptr, s.m,
                 s.n, s.k);
  if (accumulate)
    for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];

  TestBuffer workspace(kGemmLtWorkspaceBytes);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  TestBuffer dxq = upload_codes(xq), dwq = upload_codes(wq), dxs = upload(xs, DType::kF32),
             dws = upload(ws, DType::kF32), dbias = upload(bias, out), dy = upload(y0, out),
             acc(static_cast<size_t>(s.m * s.n) * 4);
  const auto* xs_d = static_cast<const float*>(dxs.get());
  const auto* ws_d = static_cast<const float*>(dws.get());
  if (gemv) {
    fp8_gemv_cuda(dy.get(), out, static_cast<const uint8_t*>(dxq.get()), xs_d, static_cast<const uint8_t*>(dwq.get()),
                  ws_d, with_bias ? dbias.get() : nullptr, out, s.m, s.n, s.k, accumulate, nullptr);
  } else {
    gemm.run(static_cast<float*>(acc.get()), static_cast<const uint8_t*>(dxq.get()),
             static_cast<const uint8_t*>(dwq.get()), s.m, s.n, s.k, nullptr);
    fp8_scale_epilogue_cuda(dy.get(), out, static_cast<const float*>(acc.get()), xs_d, ws_d,
                            with_bias ? dbias.get() : nullptr, out, s.m, s.n, accumulate, nullptr);
  }
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = download(dy.get(), want.size(), out);
  // Hopper's FP8 tensor cores accumulate with fewer bits than fp32 (seen on the H200: ~1% off on
  // outputs that cancel), so the bound is per element against sum_k |a b| x scales: 2^-12 of it, plus
  // one rounding of the output (2^-8 bf16, 2^-11 f16) relative to the value.
  const float* table = fp8_e4m3_table();
  const float rtol = out == DType::kF32 ? 1e-6f : out == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;
  size_t bad = 0, first = 0;
  double worst = 0;  // the largest error over sum_k |a b| x scales (f32 out: no output rounding)
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double mag = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) mag += std::fabs(table[xq[i * s.k + kk]] * table[wq[j * s.k + kk]]);
      const size_t e = static_cast<size_t>(i * s.n + j);
      const double tol = mag * xs[i] * ws[j] / 4096.0 + rtol * std::fabs(want[e]) + 1e-6;
      if (!(std::fabs(got[e] - want[e]) <= tol) && bad++ == 0) first = e;
      if (mag > 0) worst = std::max(worst, std::fabs(got[e] - want[e]) / (mag * xs[i] * ws[j]));
    }
  EXPECT_EQ(bad, 0u) << "first mismatch at " << first << ": got " << got[first] << ", want " << want[first];
  if (out == DType::kF32 && !with_bias && !accumulate)
    std::printf("%ldx%ldx%ld %s: largest error / sum|ab| = %.3g (the bound: 2^-12 = 2.44e-04)\n",
                static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k), gemv ? "gemv" : "cuBLASLt",
                worst);
}

TEST(Fp8Gpu, GemmWithScalesEqualsTwin) {
  for (GemmCase s : {GemmCase{1, 64, 64}, GemmCase{3, 320, 192}, GemmCase{16, 576, 1536}, GemmCase{128, 1024, 4096},
                     GemmCase{300, 4096, 512}})
    for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
      check_gemm(s, out, false, false);
      check_gemm(s, out, true, false);
      if (out != DType::kF32) check_gemm(s, out, false, true);
    }
}

// One shape's operands for the fused linear and what the twin says of them, computed once for all of
// the shape's variants (output dtype, bias, accumulate): the O(m n k) reference work dominates.
struct FusedShape {
  GemmCase s;
  std::vector<uint8_t> xq, wq;
  std::vector<float> xs, ws;
  std::vector<float> product;  // [m, n]: matmul_fp8_ref without bias
  std::vector<float> bound;    // [m, n]: Hopper's FP8 accumulator allowance, 2^-12 sum_k |a b| x scales
};

FusedShape make_fused_shape(GemmCase s) {
  FusedShape f{s, {}, {}, {}, {}, {}, {}};
  const uint64_t seed = static_cast<uint64_t>(s.m * 5 + s.n * 11 + s.k);
  const auto x = random_floats(static_cast<size_t>(s.m * s.k), seed, -3.f, 3.f);
  const auto w = random_floats(static_cast<size_t>(s.n * s.k), seed + 1, -0.1f, 0.1f);
  f.xq.resize(x.size());
  f.wq.resize(w.size());
  f.xs.resize(static_cast<size_t>(s.m));
  f.ws.resize(static_cast<size_t>(s.n));
  quantize_rows_fp8_ref(f.xq.data(), f.xs.data(), x.data(), s.m, s.k);
  quantize_rows_fp8_ref(f.wq.data(), f.ws.data(), w.data(), s.n, s.k);
  f.product.resize(static_cast<size_t>(s.m * s.n));
  matmul_fp8_ref(f.product.data(), f.xq.data(), f.xs.data(), f.wq.data(), f.ws.data(), nullptr, s.m, s.n, s.k);
  // sum_k |a b| is the twin's product of the codes with their sign bits cleared (no NaN codes here).
  auto magnitude = [](std::vector<uint8_t> q) {
    for (uint8_t& c : q) c &= 0x7f;
    return q;
  };
  f.bound.resize(f.product.size());
  matmul_fp8_ref(f.bound.data(), magnitude(f.xq).data(), f.xs.data(), magnitude(f.wq).data(), f.ws.data(), nullptr,
                 s.m, s.n, s.k);
  for (float& b : f.bound) b /= 4096.f;
  return f;
}

bool sm90_or_later() {
  int device = 0, major = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

// One variant of a shape through run_scaled, every element against the twin (bound as check_gemm's).
// b_scale sits 16 bytes into its buffer, as upload_fp8_weight places weight scales after the codes.
void check_fused(const FusedShape& f, Fp8GemmRunner& gemm, DType out, bool with_bias, bool accumulate) {
  const GemmCase s = f.s;
  SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " -> " +
               dtype_name(out) + (with_bias ? " bias" : "") + (accumulate ? " acc" : "") + " fused");
  const uint64_t seed = static_cast<uint64_t>(s.m * 3 + s.n) + (with_bias ? 100 : 0) + (accumulate ? 200 : 0);
  const auto bias = round_all(random_floats(static_cast<size_t>(s.n), seed), out);
  const auto y0 = round_all(random_floats(static_cast<size_t>(s.m * s.n), seed + 1), out);
  std::vector<float> want(f.product.size());
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      const size_t e = static_cast<size_t>(i * s.n + j);
      want[e] = f.product[e] + (with_bias ? bias[static_cast<size_t>(j)] : 0.f) + (accumulate ? y0[e] : 0.f);
    }
  std::vector<float> ws_padded(4, 0.f);
  ws_padded.insert(ws_padded.end(), f.ws.begin(), f.ws.end());
  TestBuffer dxq = upload_codes(f.xq), dwq = upload_codes(f.wq), dxs = upload(f.xs, DType::kF32),
             dws = upload(ws_padded, DType::kF32), dbias = upload(bias, out), dy = upload(y0, out);
  const bool fused = gemm.run_scaled(dy.get(), out, static_cast<const uint8_t*>(dxq.get()),
                                     static_cast<const float*>(dxs.get()), static_cast<const uint8_t*>(dwq.get()),
                                     static_cast<const float*>(dws.get()) + 4, with_bias ? dbias.get() : nullptr, out,
                                     s.m, s.n, s.k, accumulate, nullptr);
  if (!fused) {  // a silent fallback on Hopper would hide a defect; older GPUs may lack the kernels
    if (sm90_or_later()) ADD_FAILURE() << "run_scaled declined on an sm_90+ GPU";
    return;
  }
  const std::vector<float> got = download(dy.get(), want.size(), out);
  const float rtol = out == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;
  size_t bad = 0, first = 0;
  for (size_t e = 0; e < want.size(); ++e)
    if (!(std::fabs(got[e] - want[e]) <= f.bound[e] + rtol * std::fabs(want[e]) + 1e-6f) && bad++ == 0) first = e;
  EXPECT_EQ(bad, 0u) << "first mismatch at " << first << ": got " << got[first] << ", want " << want[first];
}

TEST(Fp8Gpu, FusedScaledGemmEqualsTwin) {
  TestBuffer workspace(kGemmLtWorkspaceBytes);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  // Decode, small batches, a prefill chunk and an m no tile divides; an 8B projection and a shape
  // whose n and k are legal for it (n % 8, k % 16) but no power of two.
  for (GemmCase s : {GemmCase{1, 4096, 4096}, GemmCase{16, 4096, 4096}, GemmCase{256, 4096, 4096},
                     GemmCase{1000, 4096, 4096}, GemmCase{1, 1032, 784}, GemmCase{16, 1032, 784},
                     GemmCase{256, 1032, 784}, GemmCase{1000, 1032, 784}}) {
    const FusedShape f = make_fused_shape(s);
    for (DType out : {DType::kBF16, DType::kF16})
      for (bool with_bias : {false, true})
        for (bool accumulate : {false, true}) check_fused(f, gemm, out, with_bias, accumulate);
  }
}

TEST(Fp8Gpu, FusedScaledGemmDeclinesWhatItCannotFuse) {
  // Each returns false having written nothing, so fp8_linear_cuda runs run() and the epilogue.
  TestBuffer workspace(kGemmLtWorkspaceBytes), a(4096), b(4096), s(4096), y(4096);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  const auto* codes = static_cast<const uint8_t*>(a.get());
  const auto* scale = static_cast<const float*>(s.get());
  auto fused = [&](DType out, const void* bias, DType bias_dt, int64_t n, int64_t k, const float* a_scale) {
    return gemm.run_scaled(y.get(), out, codes, a_scale, static_cast<const uint8_t*>(b.get()), scale, bias, bias_dt,
                           4, n, k, false, nullptr);
  };
  EXPECT_FALSE(fused(DType::kF32, nullptr, DType::kF32, 16, 32, scale));      // f32 y: the epilogue's
  EXPECT_FALSE(fused(DType::kBF16, s.get(), DType::kF32, 16, 32, scale));     // an f32 bias with bf16 y
  EXPECT_FALSE(fused(DType::kBF16, nullptr, DType::kBF16, 16, 24, scale));    // k % 16 != 0: run() reports
  EXPECT_FALSE(fused(DType::kBF16, nullptr, DType::kBF16, 12, 32, scale));    // y's rows of 24 bytes
  EXPECT_FALSE(fused(DType::kBF16, nullptr, DType::kBF16, 16, 32, scale + 1));  // a_scale not 16-byte aligned
}

TEST(Fp8Gpu, SmallMGemvEqualsTwin) {
  // m on both sides of 8 (one or two token halves of the mma), n with partial row tiles, k with a
  // partial chunk (512 codes per warp chunk) and the decode shapes of an 8B layer. At m <= 8 the Fp8Half kernel,
  // but for 8 x 8192 (x past its shared memory: the Fp8Codes kernel, as at m > 8).
  for (GemmCase s : {GemmCase{1, 64, 64}, GemmCase{2, 1000, 1040}, GemmCase{8, 320, 192}, GemmCase{9, 576, 1536},
                     GemmCase{16, 1024, 4096}, GemmCase{4, 6144, 4096}, GemmCase{3, 4096, 14336},
                     GemmCase{8, 256, 8192}})
    for (DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
      check_gemm(s, out, false, false, true);
      if (out == DType::kF32) check_gemm(s, out, false, false, false);  // cuBLASLt's error beside the gemv's
      check_gemm(s, out, true, false, true);
      if (out != DType::kF32) check_gemm(s, out, true, true, true);
    }
}

TEST(Fp8Gpu, RunnerRacesGemvAgainstCublasLtPerShape) {
  TestBuffer workspace(kGemmLtWorkspaceBytes);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  EXPECT_EQ(gemm.small_m_choice(1, 64, 64, nullptr), false);  // the default: cuBLASLt
  gemm.set_gemv_policy(GemvPolicy::kAuto);
  EXPECT_EQ(gemm.small_m_choice(1, 4096, 4096, nullptr), std::nullopt);  // not timed yet
  int gemv_calls = 0, lt_calls = 0;
  const bool first = gemm.time_small_m(1, 4096, 4096, [&] { ++gemv_calls; }, [&] { ++lt_calls; }, nullptr);
  EXPECT_GT(gemv_calls, 1);  // timed: one untimed call, then the timed ones
  EXPECT_EQ(gemv_calls, lt_calls);
  EXPECT_NE(gemm.describe().find("m=1 n=4096 k=4096 e4m3: "), std::string::npos) << gemm.describe();
  EXPECT_EQ(gemm.small_m_choice(1, 4096, 4096, nullptr), first);  // cached
  EXPECT_EQ(gemm.small_m_choice(17, 4096, 4096, nullptr), false);  // past the gemv's rows
  gemm.set_gemv_policy(GemvPolicy::kNever);
  EXPECT_EQ(gemm.small_m_choice(2, 4096, 4096, nullptr), false);
  gemm.set_gemv_policy(GemvPolicy::kAlways);
  EXPECT_EQ(gemm.small_m_choice(2, 4096, 4096, nullptr), true);
}

TEST(Fp8Gpu, RunnerRacesFusedAgainstEpiloguePerBucket) {
  TestBuffer workspace(kGemmLtWorkspaceBytes);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  EXPECT_EQ(gemm.fused_choice(100, 4096, 4096, nullptr), std::nullopt);  // not timed yet
  int fused_calls = 0, unfused_calls = 0;
  auto fused = [&] {
    ++fused_calls;
    return true;
  };
  const bool first = gemm.time_fused(100, 4096, 4096, fused, [&] { ++unfused_calls; }, nullptr);
  EXPECT_GT(fused_calls, 1);  // timed: one untimed call, then the timed ones
  EXPECT_EQ(fused_calls, unfused_calls);
  EXPECT_EQ(gemm.fused_choice(128, 4096, 4096, nullptr), first);         // 100's bucket
  EXPECT_EQ(gemm.fused_choice(129, 4096, 4096, nullptr), std::nullopt);  // the next bucket
  EXPECT_EQ(gemm.fused_choice(100, 4096, 1024, nullptr), std::nullopt);  // another shape
  // A fused path that declines loses at once, without further calls.
  fused_calls = 0;
  auto declined = [&] {
    ++fused_calls;
    return false;
  };
  EXPECT_FALSE(gemm.time_fused(200, 4096, 4096, declined, [] {}, nullptr));
  EXPECT_EQ(fused_calls, 1);
  EXPECT_EQ(gemm.fused_choice(129, 4096, 4096, nullptr), false);
  EXPECT_NE(gemm.describe().find("m<=256 n=4096 k=4096 e4m3: fp32+epilogue"), std::string::npos) << gemm.describe();
}

TEST(Fp8Gpu, GemmRefusesUnalignedShapes) {
  TestBuffer workspace(kGemmLtWorkspaceBytes), a(64), b(64), acc(64);
  Fp8GemmRunner gemm(workspace.get(), workspace.bytes());
  EXPECT_THROW(gemm.run(static_cast<float*>(acc.get()), static_cast<const uint8_t*>(a.get()),
                        static_cast<const uint8_t*>(b.get()), 1, 4, 12, nullptr),
               Error);
  TestBuffer y(64), xs(64);
  const auto* s = static_cast<const float*>(xs.get());
  EXPECT_THROW(fp8_gemv_cuda(y.get(), DType::kBF16, static_cast<const uint8_t*>(a.get()), s,
                             static_cast<const uint8_t*>(b.get()), s, nullptr, DType::kBF16, 1, 2, 24, false, nullptr),
               Error);  // k % 16 != 0
  EXPECT_THROW(fp8_gemv_cuda(y.get(), DType::kBF16, static_cast<const uint8_t*>(a.get()), s,
                             static_cast<const uint8_t*>(b.get()), s, nullptr, DType::kBF16, 17, 2, 32, false, nullptr),
               Error);  // m > kGemvMaxRows
}

}  // namespace
}  // namespace conveyor
