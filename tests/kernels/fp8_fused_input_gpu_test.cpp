// The FP8 linears' fused input quantizers (kernels/cuda/fp8.h): rms_norm_quantize_fp8_cuda and
// silu_mul_quantize_fp8_cuda give, bit for bit, the codes and scales of rms_norm_cuda / silu_mul_cuda
// followed by quantize_rows_fp8_cuda (each of which its own test holds to the CPU twin), on random
// bf16/f16 rows of every length the models use (576 to 14,336 and the 32,768 limit), 1 to 300 rows,
// dynamic and static scales; and they decline, launching nothing, what they cannot take.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/fp8.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::download;
using testing::download_codes;
using testing::random_floats;
using testing::TestBuffer;
using testing::upload;

// The fused result (codes, scales) against the two-kernel one, every code and scale equal.
void expect_same(const TestBuffer& q_fused, const TestBuffer& s_fused, const TestBuffer& q_ref,
                 const TestBuffer& s_ref, int64_t rows, int64_t cols) {
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto n = static_cast<size_t>(rows * cols);
  const std::vector<uint8_t> got = download_codes(q_fused, n), want = download_codes(q_ref, n);
  const std::vector<float> got_s = download(s_fused.get(), static_cast<size_t>(rows), DType::kF32);
  const std::vector<float> want_s = download(s_ref.get(), static_cast<size_t>(rows), DType::kF32);
  for (size_t r = 0; r < got_s.size(); ++r) ASSERT_EQ(got_s[r], want_s[r]) << "scale of row " << r;
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<int>(got[i]), static_cast<int>(want[i])) << "code " << i << " (row " << i / cols << ")";
}

struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{1, 4096}, {1, 14336}, {3, 576}, {16, 5120}, {64, 8192}, {65, 1024}, {300, 4096},
                         {2, 32768}, {5, 8}};

// Every dtype, shape and scale (0: dynamic, else static_scale): `run(dt, shape, scale, h, q, sc)` uploads
// its inputs, writes the unfused op's rows into h and runs the fused kernel into q and sc, returning whether
// it took them; the rows of h are then quantized by quantize_rows_fp8_cuda and both results compared.
template <typename Run>
void check_every_case(float static_scale, const Run& run) {
  for (DType dt : {DType::kBF16, DType::kF16})
    for (const Shape& s : kShapes)
      for (float scale : {0.f, static_scale}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                     " static " + std::to_string(scale));
        const auto n = static_cast<size_t>(s.rows * s.cols);
        const auto scale_bytes = static_cast<size_t>(s.rows) * 4;
        TestBuffer h(n * 2), q_ref(n), s_ref(scale_bytes), q(n), sc(scale_bytes);
        ASSERT_TRUE(run(dt, s, scale, h.get(), static_cast<uint8_t*>(q.get()), static_cast<float*>(sc.get())));
        quantize_rows_fp8_cuda(static_cast<uint8_t*>(q_ref.get()), static_cast<float*>(s_ref.get()), h.get(), dt,
                               s.rows, s.cols, scale, nullptr);
        expect_same(q, sc, q_ref, s_ref, s.rows, s.cols);
      }
}

TEST(Fp8FusedInputGpu, RmsNormQuantizeEqualsNormThenQuantize) {
  check_every_case(0.02f, [](DType dt, const Shape& s, float scale, void* h, uint8_t* q, float* sc) {
    TestBuffer x = upload(random_floats(static_cast<size_t>(s.rows * s.cols), s.rows * 7 + s.cols, -4.f, 4.f), dt);
    TestBuffer w = upload(random_floats(static_cast<size_t>(s.cols), s.cols + 3, 0.2f, 3.f), dt);
    rms_norm_cuda(h, x.get(), w.get(), s.rows, s.cols, 1e-5f, dt, nullptr);
    const bool took = rms_norm_quantize_fp8_cuda(q, sc, x.get(), w.get(), dt, s.rows, s.cols, 1e-5f, scale, nullptr);
    CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());  // before x and w are freed
    return took;
  });
}

TEST(Fp8FusedInputGpu, SiluMulQuantizeEqualsSiluMulThenQuantize) {
  check_every_case(0.05f, [](DType dt, const Shape& s, float scale, void* h, uint8_t* q, float* sc) {
    TestBuffer gate_up = upload(random_floats(static_cast<size_t>(2 * s.rows * s.cols), s.rows * 11 + s.cols, -6.f,
                                              6.f), dt);
    silu_mul_cuda(h, gate_up.get(), s.rows, s.cols, dt, nullptr);
    const bool took = silu_mul_quantize_fp8_cuda(q, sc, gate_up.get(), dt, s.rows, s.cols, scale, nullptr);
    CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());  // before gate_up is freed
    return took;
  });
}

TEST(Fp8FusedInputGpu, DeclinesWhatItCannotTake) {
  TestBuffer x = upload(random_floats(4 * 40000, 5, -1.f, 1.f), DType::kBF16);
  TestBuffer w = upload(random_floats(40000, 6, 0.5f, 1.5f), DType::kBF16);
  TestBuffer q(4 * 40000 + 16), sc(64);
  auto* codes = static_cast<uint8_t*>(q.get());
  auto* scales = static_cast<float*>(sc.get());
  const auto* x_odd = static_cast<const char*>(x.get()) + 2;  // 2-byte aligned rows
  EXPECT_FALSE(rms_norm_quantize_fp8_cuda(codes, scales, x.get(), w.get(), DType::kF32, 1, 4096, 1e-5f, 0.f, nullptr));
  EXPECT_FALSE(rms_norm_quantize_fp8_cuda(codes, scales, x.get(), w.get(), DType::kBF16, 1, 1000 + 4, 1e-5f, 0.f,
                                          nullptr));  // not whole packs
  EXPECT_FALSE(rms_norm_quantize_fp8_cuda(codes, scales, x.get(), w.get(), DType::kBF16, 1, 40000, 1e-5f, 0.f,
                                          nullptr));  // longer than 32,768
  EXPECT_FALSE(rms_norm_quantize_fp8_cuda(codes, scales, x_odd, w.get(), DType::kBF16, 1, 4096, 1e-5f, 0.f, nullptr));
  EXPECT_FALSE(rms_norm_quantize_fp8_cuda(codes + 4, scales, x.get(), w.get(), DType::kBF16, 1, 4096, 1e-5f, 0.f,
                                          nullptr));  // codes not 8-byte aligned
  EXPECT_FALSE(silu_mul_quantize_fp8_cuda(codes, scales, x.get(), DType::kBF16, 2, 1004, 0.f, nullptr));
  EXPECT_FALSE(silu_mul_quantize_fp8_cuda(codes, scales, x.get(), DType::kF32, 2, 1024, 0.f, nullptr));
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace conveyor
