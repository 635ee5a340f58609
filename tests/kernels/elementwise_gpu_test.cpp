// add_cuda, gather_rows_cuda, convert_cuda, add_bias_cuda and abs_max_cols_cuda against the CPU twins (kernels/cpu/add.h)
// or the plain formula, random inputs rounded to the storage type, every element checked; read_through_l2_cuda
// (LaunchTimer's flush) leaves its region of zeros as it was.
#include "kernels/cuda/elementwise.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "kernels/cpu/add.h"
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
using testing::upload_ids;
using testing::upload_into;

constexpr DType kFloatTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

TEST(AddGpu, MatchesCpuTwin) {
  for (DType dt : kFloatTypes) {
    for (int64_t n : {1, 7, 8, 576, 4095, 100003}) {
      for (int offset : {0, 1}) {
        const auto a = round_all(random_floats(static_cast<size_t>(n), n, -4.f, 4.f), dt);
        const auto b = round_all(random_floats(static_cast<size_t>(n), n + 1, -4.f, 4.f), dt);
        std::vector<float> want(a.size());
        add_ref(want.data(), a.data(), b.data(), n);
        want = round_all(want, dt);  // one rounding of the exact fp32 sum: bit-exact
        const size_t es = dtype_size(dt);
        TestBuffer da((n + offset) * es), db((n + offset) * es), dout((n + offset) * es);
        char* pa = da.as<char>() + offset * es;
        char* pb = db.as<char>() + offset * es;
        char* pout = dout.as<char>() + offset * es;
        upload_into(pa, a, dt);
        upload_into(pb, b, dt);
        add_cuda(pout, pa, pb, n, dt, nullptr);
        EXPECT_EQ(compare_all(download(pout, a.size(), dt), want, 0.f, 0.f), "")
            << dtype_name(dt) << " n=" << n << " offset=" << offset;
        add_cuda(pa, pa, pb, n, dt, nullptr);  // out aliases a
        EXPECT_EQ(compare_all(download(pa, a.size(), dt), want, 0.f, 0.f), "")
            << "in place " << dtype_name(dt) << " n=" << n << " offset=" << offset;
      }
    }
  }
}

TEST(GatherRowsGpu, CopiesSelectedRows) {
  for (DType dt : kFloatTypes) {
    for (int64_t cols : {1, 7, 576, 4095, 8192}) {
      const int64_t src_rows = 37;
      const auto x = round_all(random_floats(static_cast<size_t>(src_rows * cols), cols, -1.f, 1.f), dt);
      const std::vector<int32_t> rows = {36, 0, 5, 5, 17, 1, 36, 22};
      std::vector<float> want;
      for (int32_t r : rows) want.insert(want.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
      auto dx = upload(x, dt);
      auto drows = upload_ids(rows);
      TestBuffer dout(want.size() * dtype_size(dt));
      gather_rows_cuda(dout.get(), dx.get(), drows.as<int32_t>(), static_cast<int64_t>(rows.size()), cols, dt,
                       nullptr);
      EXPECT_EQ(compare_all(download(dout.get(), want.size(), dt), want, 0.f, 0.f), "")
          << dtype_name(dt) << " cols=" << cols;
    }
  }
}

TEST(ConvertGpu, RoundsToNearestEvenBothWays) {
  const int64_t n = 10007;
  for (DType src_t : kFloatTypes) {
    for (DType dst_t : kFloatTypes) {
      for (float range : {2.f, 60000.f}) {  // up to f16's largest finite values (65504)
        const auto src = round_all(random_floats(static_cast<size_t>(n), 99, -range, range), src_t);
        const auto want = round_all(src, dst_t);
        auto dsrc = upload(src, src_t);
        TestBuffer ddst(static_cast<size_t>(n) * dtype_size(dst_t));
        convert_cuda(ddst.get(), dst_t, dsrc.get(), src_t, n, nullptr);
        EXPECT_EQ(compare_all(download(ddst.get(), static_cast<size_t>(n), dst_t), want, 0.f, 0.f), "")
            << dtype_name(src_t) << " -> " << dtype_name(dst_t) << " range " << range;
      }
    }
  }
}

TEST(AddBiasGpu, AddsBiasToEveryRow) {
  for (DType yt : kFloatTypes) {
    for (DType bt : kFloatTypes) {
      const int64_t rows = 13, cols = 100;
      const auto y = round_all(random_floats(static_cast<size_t>(rows * cols), 5, -2.f, 2.f), yt);
      const auto bias = round_all(random_floats(static_cast<size_t>(cols), 6, -2.f, 2.f), bt);
      std::vector<float> want = y;
      add_bias_ref(want.data(), bias.data(), static_cast<int>(rows), static_cast<int>(cols));
      want = round_all(want, yt);
      auto dy = upload(y, yt);
      auto dbias = upload(bias, bt);
      add_bias_cuda(dy.get(), yt, dbias.get(), bt, rows, cols, nullptr);
      EXPECT_EQ(compare_all(download(dy.get(), want.size(), yt), want, 0.f, 0.f), "")
          << "y " << dtype_name(yt) << " bias " << dtype_name(bt);
    }
  }
}

// The largest |x| of a band of columns (a fused projection's K or V part): exactly the twin's, the largest
// element planted in the band (positive or negative) and a larger one outside it, which must not count.
TEST(AbsMaxColsGpu, MatchesCpuTwin) {
  for (DType dt : kFloatTypes) {
    for (auto [rows, width, col, cols] : {std::array<int64_t, 4>{1, 24, 8, 8}, {37, 768, 512, 128}, {4096, 1536, 1024, 256}}) {
      auto x = random_floats(static_cast<size_t>(rows * width), rows + width, -3.f, 3.f);
      x[static_cast<size_t>((rows / 2) * width + col + cols - 1)] = rows % 2 ? 7.5f : -7.5f;
      x[static_cast<size_t>((rows - 1) * width + (col > 0 ? col - 1 : col + cols))] = 100.f;
      x = round_all(x, dt);
      const float want = abs_max_cols_ref(x.data(), rows, width, col, cols);
      ASSERT_EQ(want, 7.5f);
      auto dx = upload(x, dt);
      TestBuffer out(sizeof(uint32_t));
      CONVEYOR_CUDA_CHECK(cudaMemset(out.get(), 0, sizeof(uint32_t)));
      abs_max_cols_cuda(out.as<uint32_t>(), dx.get(), rows, width, col, cols, dt, nullptr);
      EXPECT_EQ(download(out.get(), 1, DType::kF32)[0], want) << dtype_name(dt) << " rows " << rows;
    }
  }
}

TEST(ReadThroughL2Gpu, LeavesARegionOfZerosAsItWas) {
  for (int64_t bytes : {int64_t{16}, int64_t{4096}, (int64_t{50} << 20) + 48}) {
    TestBuffer region(static_cast<size_t>(bytes));
    CONVEYOR_CUDA_CHECK(cudaMemset(region.get(), 0, static_cast<size_t>(bytes)));
    read_through_l2_cuda(region.get(), bytes, nullptr);
    CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> back(static_cast<size_t>(bytes / 4), 1u);
    CONVEYOR_CUDA_CHECK(cudaMemcpy(back.data(), region.get(), static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
    size_t nonzero = 0;
    for (uint32_t w : back) nonzero += w != 0;
    EXPECT_EQ(nonzero, 0u) << bytes << " bytes";
  }
  TestBuffer buf(64);
  read_through_l2_cuda(buf.get(), 0, nullptr);  // nothing to read
  EXPECT_THROW(read_through_l2_cuda(buf.get(), 15, nullptr), Error);                       // not whole packs
  EXPECT_THROW(read_through_l2_cuda(buf.as<char>() + 4, 16, nullptr), Error);               // misaligned
  EXPECT_THROW(read_through_l2_cuda(buf.get(), -16, nullptr), Error);
}

TEST(ElementwiseGpu, RejectsBadArguments) {
  TestBuffer buf(64);
  EXPECT_THROW(add_cuda(buf.get(), buf.get(), buf.get(), 4, DType::kI32, nullptr), Error);
  EXPECT_THROW(add_cuda(buf.get(), buf.get(), buf.get(), -1, DType::kBF16, nullptr), Error);
  EXPECT_THROW(gather_rows_cuda(buf.get(), buf.get(), buf.as<int32_t>(), 1, 4, DType::kU8, nullptr), Error);
  EXPECT_THROW(convert_cuda(buf.get(), DType::kI64, buf.get(), DType::kF32, 4, nullptr), Error);
  EXPECT_THROW(convert_cuda(buf.get(), DType::kBF16, buf.get(), DType::kF32, 4, nullptr), Error);  // aliasing
  EXPECT_THROW(abs_max_cols_cuda(buf.as<uint32_t>(), buf.get(), 2, 8, 4, 8, DType::kF32, nullptr), Error);  // past the row
}

}  // namespace
}  // namespace conveyor
