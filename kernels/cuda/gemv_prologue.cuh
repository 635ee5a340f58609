// The fused gemv inputs (gemv.cu, gemv.h): x made by every block in shared memory from the op before, the
// RMSNorm of the hidden rows or SwiGLU of the gate|up rows, rounded exactly as rms_norm_cuda and silu_mul_cuda
// round them; or the f16 values of e4m3 codes for the FP8 gemv at m <= 8. Device code for gemv.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/dense_vec.cuh"
#include "kernels/cuda/e4m3.cuh"
#include "kernels/cuda/row_ops.cuh"

namespace conveyor::gemv_detail {

// Where x comes from: read as given (kNone), or made by the block in shared memory from `src`: kRmsNorm:
// rms_norm(src[m, k]) * norm_w, kSiluMul: silu(src[:, :k]) * src[:, k:] (src is [m, 2k]).
// kFp8Half: x = the f16 values of the e4m3 codes src[m, k] (for T = Fp8Half).
enum class Prologue { kNone, kRmsNorm, kSiluMul, kFp8Half };
struct PrologueArgs {
  const void* src = nullptr;
  const void* norm_w = nullptr;
  float eps = 0.f;
};

using cuda_detail::e4m3x4_to_f16x2x2;

// The fused inputs' x, made by the whole block into xs ([m, k] in T) after the wait for the kernel before.
// RMSNorm: pass 1 sums squares over the packs rms_norm_cuda gives each of its threads (the first
// cfg_threads threads here, cfg_packs packs each, in its order), the block reduction as block_sum does
// (idle warps add zeros); pass 2 writes rmsnorm(x) * w, rounded twice as rms_norm_row does.
template <typename T, Prologue kPro>
__device__ __forceinline__ void make_x(T* xs, const PrologueArgs& pa, int m, int packs, int cfg_packs,
                                       int cfg_threads) {
  using cuda_detail::Pack;
  using cuda_detail::to_f32;
  using cuda_detail::from_f32;
  using cuda_detail::round_to;
  constexpr int kN = Pack<T>::kSize;
  const int64_t k = static_cast<int64_t>(packs) * kN;
  __shared__ float scratch[32];
  for (int t = 0; t < m; ++t) {
    T* row = xs + t * k;
    if constexpr (kPro == Prologue::kRmsNorm) {
      const T* x = static_cast<const T*>(pa.src) + t * k;
      const T* w = static_cast<const T*>(pa.norm_w);
      float sum_sq = 0.f;
      if (static_cast<int>(threadIdx.x) < cfg_threads)
        for (int i = 0; i < cfg_packs; ++i) {
          const int p = threadIdx.x + i * cfg_threads;
          if (p >= packs) break;
          const Pack<T> v = cuda_detail::load_pack(x + static_cast<int64_t>(p) * kN);
#pragma unroll
          for (int j = 0; j < kN; ++j) sum_sq += to_f32(v.v[j]) * to_f32(v.v[j]);
        }
      const float inv_rms = rsqrtf(cuda_detail::block_sum(sum_sq, scratch) / static_cast<float>(k) + pa.eps);
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        Pack<T> v = cuda_detail::load_pack(x + static_cast<int64_t>(p) * kN);
        const Pack<T> wp = cuda_detail::load_pack(w + static_cast<int64_t>(p) * kN);
#pragma unroll
        for (int j = 0; j < kN; ++j) v.v[j] = from_f32<T>(round_to<T>(to_f32(v.v[j]) * inv_rms) * to_f32(wp.v[j]));
        cuda_detail::store_pack(row + static_cast<int64_t>(p) * kN, v);
      }
    } else {
      const T* gate = static_cast<const T*>(pa.src) + t * 2 * k;
      for (int p = threadIdx.x; p < packs; p += blockDim.x) {
        const Pack<T> g = cuda_detail::load_pack(gate + static_cast<int64_t>(p) * kN);
        const Pack<T> u = cuda_detail::load_pack(gate + k + static_cast<int64_t>(p) * kN);
        Pack<T> v;
#pragma unroll
        for (int j = 0; j < kN; ++j) v.v[j] = cuda_detail::silu_mul_one(g.v[j], u.v[j]);
        cuda_detail::store_pack(row + static_cast<int64_t>(p) * kN, v);
      }
    }
  }
  __syncthreads();
}

// Prologue::kFp8Half's x: the halves of src's e4m3 codes ([m, k], 16 codes a pack), after the wait.
__device__ __forceinline__ void make_x_fp8(__half* xs, const PrologueArgs& pa, int m, int packs) {
  const auto* src = static_cast<const uint4*>(pa.src);
  auto* dst = reinterpret_cast<uint4*>(xs);
  for (int i = threadIdx.x; i < m * packs; i += blockDim.x) {
    const uint4 c = __ldg(src + i);
    const uint32_t w[4] = {c.x, c.y, c.z, c.w};
    uint32_t h[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) e4m3x4_to_f16x2x2(w[j], h[2 * j], h[2 * j + 1]);
    dst[2 * i] = make_uint4(h[0], h[1], h[2], h[3]);
    dst[2 * i + 1] = make_uint4(h[4], h[5], h[6], h[7]);
  }
  __syncthreads();
}

}  // namespace conveyor::gemv_detail
