// Element-wise kernels (see elementwise.h). Grid-stride loops, 16-byte packs where the pointers and
// sizes allow it (add, gather); the rest is scalar because these ops are small next to the GEMMs.
#include "kernels/cuda/elementwise.h"

#include <algorithm>

#include "kernels/cuda/dense_vec.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

using cuda_detail::from_f32;
using cuda_detail::grid_for;
using cuda_detail::is_aligned16;
using cuda_detail::load_pack;
using cuda_detail::Pack;
using cuda_detail::store_pack;
using cuda_detail::to_f32;

constexpr int kThreads = 256;

// packs: number of full 16-byte packs to process as packs (0 when unaligned); the rest element-wise.
template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n, int64_t packs) {
  constexpr int kN = Pack<T>::kSize;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t p = first; p < packs; p += stride) {
    const Pack<T> x = load_pack(a + p * kN);
    const Pack<T> y = load_pack(b + p * kN);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < kN; ++j) o.v[j] = from_f32<T>(to_f32(x.v[j]) + to_f32(y.v[j]));
    store_pack(out + p * kN, o);
  }
  for (int64_t i = packs * kN + first; i < n; i += stride) out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

// Copies `width` units of U per output row.
template <typename U>
__global__ void gather_rows_kernel(U* __restrict__ out, const U* __restrict__ x, const int32_t* __restrict__ rows,
                                   int64_t width) {
  const int64_t r = blockIdx.x;
  const U* src = x + static_cast<int64_t>(rows[r]) * width;
  U* dst = out + r * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = src[i];
}

template <typename D, typename S>
__global__ void convert_kernel(D* __restrict__ dst, const S* __restrict__ src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = from_f32<D>(to_f32(src[i]));
  }
}

// One block per grid-stride share of rows; a warp-level max, then one atomicMax per warp on the bits.
template <typename T>
__global__ void abs_max_cols_kernel(uint32_t* out, const T* __restrict__ x, int64_t rows, int64_t width, int64_t col,
                                    int64_t cols) {
  float m = 0.f;
  const int64_t total = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const float a = fabsf(to_f32(x[(i / cols) * width + col + i % cols]));
    m = a > m ? a : m;  // NaN compares false and is skipped
  }
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

template <typename Y, typename B>
__global__ void add_bias_kernel(Y* __restrict__ y, const B* __restrict__ bias, int64_t total, int64_t cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    y[i] = from_f32<Y>(to_f32(y[i]) + to_f32(bias[i % cols]));
  }
}

template <typename U>
void launch_gather(void* out, const void* x, const int32_t* rows, int64_t n_rows, int64_t width, cudaStream_t s) {
  const int threads = width >= kThreads ? kThreads : static_cast<int>((width + 31) / 32 * 32);
  gather_rows_kernel<U><<<static_cast<unsigned>(n_rows), threads, 0, s>>>(static_cast<U*>(out),
                                                                         static_cast<const U*>(x), rows, width);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

// Binds S to the storage type of `src_t` inside a dispatch on the destination type.
template <typename D>
void convert_from(D* dst, const void* src, DType src_t, int64_t n, cudaStream_t s) {
  CONVEYOR_DISPATCH_FLOAT(src_t, "convert_cuda (source)", true,
                          convert_kernel<D, T><<<grid_for(n, kThreads), kThreads, 0, s>>>(
                              dst, static_cast<const T*>(src), n));
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

template <typename Y>
void add_bias_from(Y* y, const void* bias, DType bias_t, int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t total = rows * cols;
  CONVEYOR_DISPATCH_FLOAT(bias_t, "add_bias_cuda (bias)", true,
                          add_bias_kernel<Y, T><<<grid_for(total, kThreads), kThreads, 0, s>>>(
                              y, static_cast<const T*>(bias), total, cols));
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

// Every lane folds its 16-byte loads (L2 only, __ldcg) into one word; the store (never taken on zeros) only keeps
// the loads from being dropped. Any lane may take it (the same value), so no lane's loads are provably dead.
__global__ void read_through_l2_kernel(const uint4* __restrict__ p, int64_t packs, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x5EEDF00Du) *sink = acc;
}

}  // namespace

void read_through_l2_cuda(const void* p, int64_t bytes, cudaStream_t s) {
  CONVEYOR_CHECK(bytes >= 0 && bytes % 16 == 0 && (bytes == 0 || is_aligned16(p)), "read_through_l2_cuda: ", bytes,
                 " bytes at ", p, " (need a multiple of 16 bytes, 16-byte aligned)");
  if (bytes == 0) return;
  const int64_t packs = bytes / 16;
  read_through_l2_kernel<<<std::min(grid_for(packs, kThreads), 4096u), kThreads, 0, s>>>(
      static_cast<const uint4*>(p), packs, static_cast<uint32_t*>(const_cast<void*>(p)));
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

void add_cuda(void* out, const void* a, const void* b, int64_t n, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(n >= 0, "add_cuda: bad length n=", n);
  if (n == 0) return;
  CONVEYOR_CHECK(out != nullptr && a != nullptr && b != nullptr, "add_cuda: null device pointer");
  const bool packed = is_aligned16(out) && is_aligned16(a) && is_aligned16(b);
  CONVEYOR_DISPATCH_FLOAT(dt, "add_cuda", true, {
    const int64_t packs = packed ? n / Pack<T>::kSize : 0;
    const int64_t work = packs > 0 ? packs : n;
    add_kernel<T><<<grid_for(work, kThreads), kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                               static_cast<const T*>(b), n, packs);
  });
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

void gather_rows_cuda(void* out, const void* x, const int32_t* rows, int64_t n_rows, int64_t cols, DType dt,
                      cudaStream_t s) {
  CONVEYOR_CHECK(n_rows >= 0 && n_rows <= 0x7fffffff && cols > 0, "gather_rows_cuda: bad shape n_rows=", n_rows,
                 " cols=", cols);
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kF32,
                 "gather_rows_cuda: unsupported dtype ", dtype_name(dt), "; use bf16, f16 or f32");
  if (n_rows == 0) return;
  CONVEYOR_CHECK(out != nullptr && x != nullptr && rows != nullptr, "gather_rows_cuda: null device pointer");
  const int64_t row_bytes = cols * static_cast<int64_t>(dtype_size(dt));
  if (row_bytes % 16 == 0 && is_aligned16(out) && is_aligned16(x)) {
    launch_gather<uint4>(out, x, rows, n_rows, row_bytes / 16, s);
  } else if (dt == DType::kF32) {
    launch_gather<float>(out, x, rows, n_rows, cols, s);
  } else {
    launch_gather<uint16_t>(out, x, rows, n_rows, cols, s);
  }
}

void convert_cuda(void* dst, DType dst_t, const void* src, DType src_t, int64_t n, cudaStream_t s) {
  CONVEYOR_CHECK(n >= 0, "convert_cuda: bad length n=", n);
  if (n == 0) return;
  CONVEYOR_CHECK(dst != nullptr && src != nullptr, "convert_cuda: null device pointer");
  if (dst_t == src_t) {
    CONVEYOR_CHECK(dst_t == DType::kBF16 || dst_t == DType::kF16 || dst_t == DType::kF32,
                   "convert_cuda: unsupported dtype ", dtype_name(dst_t), "; use bf16, f16 or f32");
    if (dst != src) {
      CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * dtype_size(dst_t),
                                          cudaMemcpyDeviceToDevice, s));
    }
    return;
  }
  CONVEYOR_CHECK(dst != src, "convert_cuda: dst must not alias src when converting ", dtype_name(src_t), " to ",
                 dtype_name(dst_t));
  // The outer dispatch binds T to the destination type; convert_from binds the source.
  CONVEYOR_DISPATCH_FLOAT(dst_t, "convert_cuda (destination)", true,
                          convert_from<T>(static_cast<T*>(dst), src, src_t, n, s));
}

void add_bias_cuda(void* y, DType y_t, const void* bias, DType bias_t, int64_t rows, int64_t cols, cudaStream_t s) {
  CONVEYOR_CHECK(rows >= 0 && cols > 0, "add_bias_cuda: bad shape rows=", rows, " cols=", cols);
  if (rows == 0) return;
  CONVEYOR_CHECK(y != nullptr && bias != nullptr, "add_bias_cuda: null device pointer");
  CONVEYOR_DISPATCH_FLOAT(y_t, "add_bias_cuda (y)", true,
                          add_bias_from<T>(static_cast<T*>(y), bias, bias_t, rows, cols, s));
}

void abs_max_cols_cuda(uint32_t* out, const void* x, int64_t rows, int64_t width, int64_t col, int64_t cols, DType dt,
                       cudaStream_t s) {
  CONVEYOR_CHECK(rows >= 0 && cols >= 0 && col >= 0 && col + cols <= width, "abs_max_cols_cuda: columns [", col,
                 ", +", cols, ") of a width of ", width);
  if (rows == 0 || cols == 0) return;
  CONVEYOR_CHECK(out != nullptr && x != nullptr, "abs_max_cols_cuda: null device pointer");
  const int64_t total = rows * cols;
  const int blocks = static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, 1024));
  CONVEYOR_DISPATCH_FLOAT(dt, "abs_max_cols_cuda", true,
                          abs_max_cols_kernel<T><<<blocks, kThreads, 0, s>>>(out, static_cast<const T*>(x), rows, width,
                                                                             col, cols));
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace conveyor
