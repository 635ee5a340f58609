// gemv_cuda against the CPU twin (kernels/cpu/matmul.h): random x, w, bias and prior y rounded to
// bf16/f16, m in {1, 2, 3, 7, 16}, odd n, k up to 14344, every combination of bias, accumulate and f32
// output, every element checked, and a guard region after y that must stay untouched. Also: bad
// arguments throw before anything is launched.
#include "kernels/cuda/gemv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/matmul.h"
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
using testing::upload;
using testing::upload_into;

constexpr size_t kGuard = 64;      // elements after y that must not be written
constexpr float kGuardValue = 0.75f;  // exact in every dtype

// Host values (rounded to dt) and their device copies for one (n, k): x holds kGemvMaxRows rows, of
// which a case uses the first m.
struct Operands {
  std::vector<float> x, w, bias;
  TestBuffer dx, dw, dbias;
};

Operands make_operands(DType dt, int64_t n, int64_t k, uint64_t seed) {
  auto x = round_all(random_floats(static_cast<size_t>(kGemvMaxRows * k), seed, -1.f, 1.f), dt);
  auto w = round_all(random_floats(static_cast<size_t>(n * k), seed + 1, -1.f, 1.f), dt);
  auto bias = round_all(random_floats(static_cast<size_t>(n), seed + 2, -1.f, 1.f), dt);
  auto dx = upload(x, dt);
  auto dw = upload(w, dt);
  auto dbias = upload(bias, dt);
  return {std::move(x), std::move(w), std::move(bias), std::move(dx), std::move(dw), std::move(dbias)};
}

// Runs one variant on the device and checks every element against prod (+ bias) (+ y0).
void check_variant(const Operands& ops, const std::vector<float>& prod, DType dt, DType out, bool with_bias,
                   bool accumulate, int64_t m, int64_t n, int64_t k) {
  const size_t count = static_cast<size_t>(m * n);
  const auto y0 = round_all(random_floats(count, static_cast<uint64_t>(m * 131 + n * 7 + k), -1.f, 1.f), out);
  std::vector<float> init = y0;
  init.resize(count + kGuard, kGuardValue);
  TestBuffer dy(init.size() * dtype_size(out));
  upload_into(dy.get(), init, out);
  gemv_cuda(dy.get(), out, ops.dx.get(), ops.dw.get(), with_bias ? ops.dbias.get() : nullptr, m, n, k, accumulate,
            dt, nullptr);

  std::vector<float> want(count + kGuard, kGuardValue);
  for (size_t i = 0; i < count; ++i) {
    want[i] = prod[i] + (with_bias ? ops.bias[i % static_cast<size_t>(n)] : 0.f) + (accumulate ? y0[i] : 0.f);
  }
  const auto got = download(dy.get(), want.size(), out);
  const auto tol = testing::matmul_tolerance(out, k);
  EXPECT_EQ(compare_all(got, want, tol.atol, tol.rtol), "")
      << "dt " << dtype_name(dt) << " out " << dtype_name(out) << (with_bias ? " bias" : "")
      << (accumulate ? " accumulate" : "") << " m=" << m << " n=" << n << " k=" << k
      << " (indices >= " << count << " are the guard after y)";
}

TEST(GemvGpu, MatchesCpuTwinForEveryVariant) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int64_t k : {8, 4096, 14344}) {
      for (int64_t n : {1, 33, 1000, 4097}) {
        const Operands ops = make_operands(dt, n, k, static_cast<uint64_t>(n * 1009 + k));
        for (int64_t m : {1, 2, 3, 7, 16}) {
          std::vector<float> prod(static_cast<size_t>(m * n));
          matmul_ref(prod.data(), ops.x.data(), ops.w.data(), nullptr, static_cast<int>(m), static_cast<int>(n),
                     static_cast<int>(k));
          for (DType out : {dt, DType::kF32}) {
            for (bool with_bias : {false, true}) {
              for (bool accumulate : {false, true}) check_variant(ops, prod, dt, out, with_bias, accumulate, m, n, k);
            }
          }
        }
      }
    }
  }
}

// Every m in range (each picks its own token masking and tile layout) on a narrow shape (one row
// tile per warp) and a wide one (two row tiles per warp for m > 8), k not a multiple of a warp chunk.
TEST(GemvGpu, EveryRowCount) {
  const DType dt = DType::kBF16;
  for (int64_t n : {72, 9000}) {
    const int64_t k = 1032;
    const Operands ops = make_operands(dt, n, k, 99u + static_cast<uint64_t>(n));
    for (int64_t m = 1; m <= kGemvMaxRows; ++m) {
      std::vector<float> prod(static_cast<size_t>(m * n));
      matmul_ref(prod.data(), ops.x.data(), ops.w.data(), nullptr, static_cast<int>(m), static_cast<int>(n),
                 static_cast<int>(k));
      check_variant(ops, prod, dt, dt, true, m % 2 == 0, m, n, k);
    }
  }
}

TEST(GemvGpu, RejectsBadArguments) {
  TestBuffer buf(1 << 16);
  void* p = buf.get();
  const DType bf = DType::kBF16;
  EXPECT_THROW(gemv_cuda(p, bf, p, p, nullptr, 0, 8, 8, false, bf, nullptr), Error);   // m = 0
  EXPECT_THROW(gemv_cuda(p, bf, p, p, nullptr, 17, 8, 8, false, bf, nullptr), Error);  // m > 16
  EXPECT_THROW(gemv_cuda(p, bf, p, p, nullptr, 1, 0, 8, false, bf, nullptr), Error);   // n = 0
  EXPECT_THROW(gemv_cuda(p, bf, p, p, nullptr, 1, 8, 12, false, bf, nullptr), Error);  // k % 8
  EXPECT_THROW(gemv_cuda(p, DType::kF32, p, p, nullptr, 1, 8, 8, false, DType::kF32, nullptr), Error);
  EXPECT_THROW(gemv_cuda(p, DType::kF16, p, p, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  EXPECT_THROW(gemv_cuda(p, bf, buf.as<char>() + 2, p, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  EXPECT_THROW(gemv_cuda(p, bf, p, buf.as<char>() + 8, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  EXPECT_THROW(gemv_cuda(nullptr, bf, p, p, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  try {
    gemv_cuda(p, bf, p, p, nullptr, 17, 8, 8, false, bf, nullptr);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("GemmRunner"), std::string::npos) << e.message();
  }
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace conveyor
