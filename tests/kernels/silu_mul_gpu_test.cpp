// silu_mul_cuda against the CPU twin (kernels/cpu/silu_mul.h) on random gate_up rows rounded to the
// storage type, every element checked; both the 16-byte path and the element path.
#include "kernels/cuda/silu_mul.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/silu_mul.h"
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

void check(DType dt, int64_t tokens, int64_t inter, int offset) {
  const size_t n_in = static_cast<size_t>(tokens * 2 * inter), n_out = static_cast<size_t>(tokens * inter);
  const auto gate_up = round_all(random_floats(n_in, static_cast<uint64_t>(tokens * 31 + inter), -6.f, 6.f), dt);
  std::vector<float> want(n_out);
  silu_mul_ref(want.data(), gate_up.data(), static_cast<int>(tokens), static_cast<int>(inter));

  const size_t es = dtype_size(dt);
  TestBuffer din((n_in + offset) * es), dout((n_out + offset) * es);
  char* pin = din.as<char>() + offset * es;
  char* pout = dout.as<char>() + offset * es;
  upload_into(pin, gate_up, dt);
  silu_mul_cuda(pout, pin, tokens, inter, dt, nullptr);
  const auto tol = tolerance_for(dt);
  EXPECT_EQ(compare_all(download(pout, n_out, dt), want, tol.atol, tol.rtol), "")
      << dtype_name(dt) << " tokens=" << tokens << " inter=" << inter << " offset=" << offset;
}

TEST(SiluMulGpu, MatchesCpuTwin) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t tokens : {1, 3, 257}) {
      for (int64_t inter : {1, 7, 576, 4095, 8192, 14336}) {
        if (tokens * inter > 2'000'000) continue;  // keeps the CPU reference quick
        check(dt, tokens, inter, 0);
      }
    }
    check(dt, 5, 4096, 1);  // unaligned pointers: element path
  }
}

TEST(SiluMulGpu, RejectsBadArguments) {
  TestBuffer buf(64);
  EXPECT_THROW(silu_mul_cuda(buf.get(), buf.get(), 1, 8, DType::kI64, nullptr), Error);
  EXPECT_THROW(silu_mul_cuda(buf.get(), buf.get(), 1, 0, DType::kBF16, nullptr), Error);
  EXPECT_THROW(silu_mul_cuda(buf.get(), buf.get(), -1, 8, DType::kBF16, nullptr), Error);
  EXPECT_NO_THROW(silu_mul_cuda(buf.get(), buf.get(), 0, 8, DType::kBF16, nullptr));
}

}  // namespace
}  // namespace conveyor
