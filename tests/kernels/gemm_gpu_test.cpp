// GemmRunner against the CPU twin (kernels/cpu/matmul.h): random x, w, bias rounded to bf16/f16, the
// reference in fp32 from the same rounded values, outputs in the input type or f32, every element
// checked. Also: cached plans give the same result, unsupported shapes and types throw.
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "runtime/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::DeviceBuffer;
using testing::download;
using testing::random_floats;
using testing::round_all;
using testing::upload;

struct Shape {
  int64_t m, n, k;
};

// One final rounding to `out` (at most half an ulp of the exact fp32 sum) plus accumulation-order
// noise of fp32 sums, which grows like sqrt(k) (tensor cores and split-K add in another order than
// the CPU twin).
testing::Tolerance gemm_tolerance(DType out, int64_t k) {
  const float noise = 1e-4f + 2e-5f * std::sqrt(static_cast<float>(k));
  switch (out) {
    case DType::kBF16: return {1e-3f + noise, 8e-3f};
    case DType::kF16: return {noise, 1e-3f};
    default: return {noise, 1e-4f};
  }
}

void check(GemmRunner& gemm, DType ab, DType out, bool with_bias, Shape s) {
  const uint64_t seed = static_cast<uint64_t>(s.m * 7919 + s.n * 31 + s.k);
  const auto x = round_all(random_floats(static_cast<size_t>(s.m * s.k), seed, -1.f, 1.f), ab);
  const auto w = round_all(random_floats(static_cast<size_t>(s.n * s.k), seed + 1, -1.f, 1.f), ab);
  const auto bias = round_all(random_floats(static_cast<size_t>(s.n), seed + 2, -1.f, 1.f), ab);
  std::vector<float> want(static_cast<size_t>(s.m * s.n));
  matmul_ref(want.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, static_cast<int>(s.m),
             static_cast<int>(s.n), static_cast<int>(s.k));

  auto dx = upload(x, ab);
  auto dw = upload(w, ab);
  auto dbias = upload(bias, ab);
  DeviceBuffer dy(want.size() * dtype_size(out));
  gemm.run(dy.get(), out, dx.get(), dw.get(), ab, with_bias ? dbias.get() : nullptr, s.m, s.n, s.k, nullptr);
  const auto tol = gemm_tolerance(out, s.k);
  EXPECT_EQ(compare_all(download(dy.get(), want.size(), out), want, tol.atol, tol.rtol), "")
      << "ab " << dtype_name(ab) << " out " << dtype_name(out) << (with_bias ? " bias" : "") << " m=" << s.m
      << " n=" << s.n << " k=" << s.k;
}

TEST(GemmGpu, MatchesCpuTwin) {
  GemmRunner gemm;
  const std::vector<Shape> nk = {{0, 100, 72}, {0, 7, 64}, {0, 37, 8}, {0, 1000, 512}, {0, 576, 1536}};
  for (DType ab : {DType::kBF16, DType::kF16}) {
    for (DType out : {ab, DType::kF32}) {
      for (bool with_bias : {false, true}) {
        for (int64_t m : {1, 5, 16, 128, 300}) {
          for (Shape s : nk) check(gemm, ab, out, with_bias, {m, s.n, s.k});
        }
      }
    }
  }
}

TEST(GemmGpu, HeuristicOnlyAndCachedPlansAgree) {
  GemmRunner gemm(4u << 20);
  gemm.set_autotune(false);
  for (int64_t m : {1, 16, 300}) check(gemm, DType::kBF16, DType::kBF16, true, {m, 256, 1024});
  const size_t planned = gemm.cached_shapes();
  EXPECT_EQ(planned, 3u);
  gemm.set_autotune(true);  // plans made without timing are timed on their next use
  for (int64_t m : {1, 16, 300}) check(gemm, DType::kBF16, DType::kBF16, true, {m, 256, 1024});
  EXPECT_EQ(gemm.cached_shapes(), planned);
}

TEST(GemmGpu, NoWorkspaceStillRuns) {
  GemmRunner gemm(0);
  check(gemm, DType::kF16, DType::kF16, false, {16, 512, 2048});
}

TEST(GemmGpu, ZeroRowsIsANoOp) {
  GemmRunner gemm;
  DeviceBuffer buf(1 << 12);
  EXPECT_NO_THROW(gemm.run(buf.get(), DType::kBF16, buf.get(), buf.get(), DType::kBF16, nullptr, 0, 8, 8, nullptr));
  EXPECT_EQ(gemm.cached_shapes(), 0u);
}

TEST(GemmGpu, RejectsUnsupportedShapesAndTypes) {
  GemmRunner gemm;
  DeviceBuffer buf(1 << 16);
  void* p = buf.get();
  // k not a multiple of 8: rows of x and w would not be 16-byte aligned.
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 7, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 100, nullptr), Error);
  // Inputs must be bf16 or f16; the output the input type or f32.
  EXPECT_THROW(gemm.run(p, DType::kF32, p, p, DType::kF32, nullptr, 4, 8, 8, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kF16, p, p, DType::kBF16, nullptr, 4, 8, 8, nullptr), Error);
  // Misaligned x.
  EXPECT_THROW(gemm.run(p, DType::kBF16, buf.as<char>() + 2, p, DType::kBF16, nullptr, 4, 8, 8, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 0, 8, nullptr), Error);
  try {
    gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 7, nullptr);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("multiple of 8"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
