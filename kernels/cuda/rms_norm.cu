// RMSNorm kernels (see rms_norm.h). One block per row. The fast path keeps the row in registers as
// 16-byte packs (cols % 8 == 0, aligned pointers, cols <= 32768), so x is read once and out written
// once; the general path reads the row twice (the second read mostly hits L1/L2).
#include "kernels/cuda/rms_norm.h"

#include "kernels/cuda/dense_vec.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

using cuda_detail::block_sum;
using cuda_detail::Pack;
using cuda_detail::round_to;
using cuda_detail::store_pack;
using cuda_detail::to_f32;
using cuda_detail::from_f32;

constexpr int kMaxThreads = cuda_detail::kRowMaxThreads;

// Each thread owns packs threadIdx.x + i * blockDim.x, so reading x and writing out at the same
// index (out aliasing x) is safe.
template <typename T, int kPacks>
__global__ void __launch_bounds__(kMaxThreads)
    rms_norm_pack_kernel(T* out, const T* x, const T* w, int64_t cols, float eps) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  __shared__ float scratch[32];
  constexpr int kN = Pack<T>::kSize;
  const int packs = static_cast<int>(cols / kN);
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  Pack<T> row[kPacks];
  cuda_detail::rms_norm_row<T, kPacks>(row, x + base, w, packs, cols, eps, scratch);
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p < packs) store_pack(out + base + static_cast<int64_t>(p) * kN, row[i]);
  }
}

// Any cols and alignment: pass 1 sums squares, pass 2 normalises. Each thread touches the same
// indices in both passes, so out aliasing x is safe.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    rms_norm_scalar_kernel(T* out, const T* x, const T* w, int64_t cols, float eps) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float sum_sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_f32(x[base + c]);
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[base + c] = from_f32<T>(round_to<T>(to_f32(x[base + c]) * inv_rms) * to_f32(w[c]));
  }
}

int round_up_warp(int64_t n) { return static_cast<int>((n + 31) / 32 * 32); }

template <typename T>
void launch(T* out, const T* x, const T* w, int64_t rows, int64_t cols, float eps,
            cudaStream_t s) {
  constexpr int kN = Pack<T>::kSize;
  const bool packed = cols % kN == 0 && cuda_detail::row_pack_fits(cols / kN) &&
                      cuda_detail::is_aligned16(out) && cuda_detail::is_aligned16(x) &&
                      cuda_detail::is_aligned16(w);
  const dim3 grid(static_cast<unsigned>(rows));
  if (!packed) {
    const int threads = static_cast<int>(cols >= kMaxThreads ? kMaxThreads : round_up_warp(cols));
    cuda_detail::launch_maybe_pdl(rms_norm_scalar_kernel<T>, grid, dim3(threads), 0, s, out, x, w, cols, eps);
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const auto [k, threads] = cuda_detail::row_pack_config(cols / kN);  // as fp8.cu's fused quantizer
  auto* kernel = k == 1   ? rms_norm_pack_kernel<T, 1>
                 : k == 2 ? rms_norm_pack_kernel<T, 2>
                 : k == 4 ? rms_norm_pack_kernel<T, 4>
                          : rms_norm_pack_kernel<T, 8>;
  cuda_detail::launch_maybe_pdl(kernel, grid, dim3(threads), 0, s, out, x, w, cols, eps);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

void check_args(const char* op, const void* out, const void* x, const void* w, int64_t rows, int64_t cols,
                float eps) {
  CONVEYOR_CHECK(rows >= 0 && rows <= 0x7fffffff && cols > 0 && cols <= 0x7fffffff, op, ": bad shape rows=", rows,
                 " cols=", cols, " (need 0 <= rows < 2^31, 0 < cols < 2^31)");
  CONVEYOR_CHECK(eps >= 0.f, op, ": eps must be >= 0, got ", eps);
  CONVEYOR_CHECK(rows == 0 || (out != nullptr && x != nullptr && w != nullptr), op, ": null device pointer");
}

}  // namespace

void rms_norm_cuda(void* out, const void* x, const void* w, int64_t rows, int64_t cols, float eps, DType dt,
                   cudaStream_t s) {
  check_args("rms_norm_cuda", out, x, w, rows, cols, eps);
  if (rows == 0) return;
  CONVEYOR_DISPATCH_FLOAT(dt, "rms_norm_cuda", true,
                          launch<T>(static_cast<T*>(out), static_cast<const T*>(x), static_cast<const T*>(w), rows,
                                    cols, eps, s));
}

}  // namespace conveyor
