// rms_norm_cuda against the CPU twin (kernels/cpu/rms_norm.h) on random inputs rounded to the
// storage type, every element checked. The GPU rounds x_norm to dt before the weight multiply (as HF
// transformers does), so the tolerance allows two roundings.
#include "kernels/cuda/rms_norm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/rms_norm.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::TestBuffer;
using testing::download;
using testing::random_floats;
using testing::round_all;
using testing::tolerance_for;
using testing::upload_into;

constexpr float kEps = 1e-5f;

std::string label(DType dt, int64_t rows, int64_t cols, int offset) {
  return std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
         " offset=" + std::to_string(offset);
}

// offset > 0 shifts every device pointer by that many elements, which forces the unaligned path.
void check_rms_norm(DType dt, int64_t rows, int64_t cols, int offset) {
  const size_t n = static_cast<size_t>(rows * cols);
  const uint64_t seed = static_cast<uint64_t>(rows * 131 + cols);
  const auto x = round_all(random_floats(n, seed, -3.f, 3.f), dt);
  const auto w = round_all(random_floats(static_cast<size_t>(cols), seed + 1, -1.5f, 1.5f), dt);
  std::vector<float> want(n);
  rms_norm_ref(want.data(), x.data(), w.data(), static_cast<int>(rows), static_cast<int>(cols), kEps);

  const size_t es = dtype_size(dt);
  TestBuffer dx((n + offset) * es), dw((cols + offset) * es), dout((n + offset) * es);
  char* px = dx.as<char>() + offset * es;
  char* pw = dw.as<char>() + offset * es;
  char* pout = dout.as<char>() + offset * es;
  upload_into(px, x, dt);
  upload_into(pw, w, dt);
  rms_norm_cuda(pout, px, pw, rows, cols, kEps, dt, nullptr);
  const auto tol = tolerance_for(dt);
  EXPECT_EQ(compare_all(download(pout, n, dt), want, tol.atol, tol.rtol), "") << label(dt, rows, cols, offset);

  // In place (out aliases x) gives the same result.
  rms_norm_cuda(px, px, pw, rows, cols, kEps, dt, nullptr);
  EXPECT_EQ(compare_all(download(px, n, dt), want, tol.atol, tol.rtol), "") << "in place " << label(dt, rows, cols, offset);
}

TEST(RmsNormGpu, MatchesCpuTwin) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t rows : {1, 3, 257}) {
      for (int64_t cols : {1, 7, 8, 576, 4095, 8192, 16384, 40000}) {
        if (rows * cols > 3'000'000) continue;  // keeps the CPU reference quick
        check_rms_norm(dt, rows, cols, 0);
      }
    }
  }
}

TEST(RmsNormGpu, UnalignedPointersTakeGeneralPath) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) check_rms_norm(dt, 5, 4096, 1);
}

TEST(RmsNormGpu, RejectsBadArguments) {
  TestBuffer buf(64);
  EXPECT_THROW(rms_norm_cuda(buf.get(), buf.get(), buf.get(), 1, 8, kEps, DType::kI32, nullptr), Error);
  EXPECT_THROW(rms_norm_cuda(buf.get(), buf.get(), buf.get(), 1, 0, kEps, DType::kBF16, nullptr), Error);
  EXPECT_THROW(rms_norm_cuda(buf.get(), buf.get(), buf.get(), 1, 8, -1.f, DType::kBF16, nullptr), Error);
  // Zero rows is a no-op, not an error.
  EXPECT_NO_THROW(rms_norm_cuda(buf.get(), buf.get(), buf.get(), 0, 8, kEps, DType::kBF16, nullptr));
}

}  // namespace
}  // namespace conveyor
