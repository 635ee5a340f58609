// gemv_rms_norm_cuda and gemv_silu_mul_cuda (the gemv making its input from the op before) against the two
// kernels they replace, rms_norm_cuda or silu_mul_cuda then gemv_cuda: random inputs, the decode shapes of an
// 8B model (q|k|v, gate|up: more block tiles than two per SM, so the fused grid takes them in turns; down) and
// odd ones, m 1-8, bias, accumulate and f32 output; every element equal bit for bit, and a guard after y that
// must stay untouched. gemv_fused_takes says which shapes the fused kernel takes.
#include "kernels/cuda/gemv.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::download;
using testing::random_floats;
using testing::round_all;
using testing::TestBuffer;
using testing::upload;
using testing::upload_into;

constexpr size_t kGuard = 64;
constexpr float kGuardValue = 0.75f;

struct Case {
  int64_t n, k;
};

// y for both paths from the same prior y (accumulate) plus a guard; returns (two kernels, fused) downloads.
template <typename TwoKernels, typename Fused>
void expect_same(DType out, int64_t m, int64_t n, const char* what, int64_t k, TwoKernels two, Fused fused) {
  const size_t count = static_cast<size_t>(m * n);
  std::vector<float> init = round_all(random_floats(count, static_cast<uint64_t>(m * 31 + n + k), -1.f, 1.f), out);
  init.resize(count + kGuard, kGuardValue);
  TestBuffer a(init.size() * dtype_size(out)), b(init.size() * dtype_size(out));
  upload_into(a.get(), init, out);
  upload_into(b.get(), init, out);
  two(a.get());
  fused(b.get());
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> want = download(a.get(), init.size(), out), got = download(b.get(), init.size(), out);
  size_t diff = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(want[i] == got[i]) && diff++ == 0) first = i;
  EXPECT_EQ(diff, 0u) << what << " out " << dtype_name(out) << " m=" << m << " n=" << n << " k=" << k << ": first at "
                      << first << " (" << got[first] << " vs " << want[first] << "; >= " << count << " is the guard)";
}

TEST(GemvFusedGpu, RmsNormThenGemvBitForBit) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (const Case c : {Case{6144, 4096}, Case{28672, 4096}, Case{1000, 1032}, Case{33, 512}}) {
      const auto w = upload(round_all(random_floats(static_cast<size_t>(c.n * c.k), 7, -1.f, 1.f), dt), dt);
      const auto bias = upload(round_all(random_floats(static_cast<size_t>(c.n), 8, -1.f, 1.f), dt), dt);
      const auto gamma = upload(round_all(random_floats(static_cast<size_t>(c.k), 9, 0.5f, 1.5f), dt), dt);
      for (int64_t m : {1, 2, 5, 8}) {
        ASSERT_TRUE(gemv_fused_takes(true, m, c.n, c.k, dt)) << "m=" << m << " n=" << c.n << " k=" << c.k;
        const auto h = upload(round_all(random_floats(static_cast<size_t>(m * c.k), 10 + m, -3.f, 3.f), dt), dt);
        TestBuffer normed(static_cast<size_t>(m * c.k) * dtype_size(dt));
        for (DType out : {dt, DType::kF32}) {
          for (int variant = 0; variant < 3; ++variant) {
            const bool with_bias = variant == 1, acc = variant == 2 && out == dt;
            const void* b = with_bias ? bias.get() : nullptr;
            expect_same(out, m, c.n, "rms_norm", c.k,
                        [&](void* y) {
                          rms_norm_cuda(normed.get(), h.get(), gamma.get(), m, c.k, 1e-5f, dt, nullptr);
                          gemv_cuda(y, out, normed.get(), w.get(), b, m, c.n, c.k, acc, dt, nullptr);
                        },
                        [&](void* y) {
                          gemv_rms_norm_cuda(y, out, h.get(), gamma.get(), 1e-5f, w.get(), b, m, c.n, c.k, acc, dt,
                                             nullptr);
                        });
          }
        }
      }
    }
  }
}

TEST(GemvFusedGpu, SiluMulThenGemvBitForBit) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (const Case c : {Case{4096, 14336}, Case{1000, 1032}, Case{33, 512}}) {
      const auto w = upload(round_all(random_floats(static_cast<size_t>(c.n * c.k), 17, -1.f, 1.f), dt), dt);
      for (int64_t m : {1, 2, 3}) {
        ASSERT_TRUE(gemv_fused_takes(false, m, c.n, c.k, dt)) << "m=" << m << " n=" << c.n << " k=" << c.k;
        const auto gu =
            upload(round_all(random_floats(static_cast<size_t>(m * 2 * c.k), 20 + m, -4.f, 4.f), dt), dt);
        TestBuffer act(static_cast<size_t>(m * c.k) * dtype_size(dt));
        for (bool acc : {false, true}) {
          expect_same(dt, m, c.n, "silu_mul", c.k,
                      [&](void* y) {
                        silu_mul_cuda(act.get(), gu.get(), m, c.k, dt, nullptr);
                        gemv_cuda(y, dt, act.get(), w.get(), nullptr, m, c.n, c.k, acc, dt, nullptr);
                      },
                      [&](void* y) {
                        gemv_silu_mul_cuda(y, dt, gu.get(), w.get(), nullptr, m, c.n, c.k, acc, dt, nullptr);
                      });
        }
      }
    }
  }
}

TEST(GemvFusedGpu, TakesOnlyWhatItCanMake) {
  const DType bf = DType::kBF16;
  EXPECT_FALSE(gemv_fused_takes(true, 1, 4096, 4096, DType::kF32));
  EXPECT_FALSE(gemv_fused_takes(true, kGemvFusedMaxRows + 1, 4096, 4096, bf));
  EXPECT_FALSE(gemv_fused_takes(false, 4, 4096, 14336, bf));  // 4 x 14336 x 2 bytes > kGemvFusedMaxBytes
  EXPECT_TRUE(gemv_fused_takes(false, 3, 4096, 14336, bf));
  EXPECT_FALSE(gemv_fused_takes(true, 1, 4096, 12, bf));  // k % 8
  TestBuffer buf(1 << 16);
  void* p = buf.get();
  EXPECT_THROW(gemv_rms_norm_cuda(p, bf, p, p, 1e-5f, p, nullptr, 9, 8, 8, false, bf, nullptr), Error);
  EXPECT_THROW(gemv_rms_norm_cuda(p, bf, p, nullptr, 1e-5f, p, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  EXPECT_THROW(gemv_silu_mul_cuda(p, bf, buf.as<char>() + 2, p, nullptr, 1, 8, 8, false, bf, nullptr), Error);
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace conveyor
