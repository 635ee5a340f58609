// Device helpers for kernels that hold one row per block in registers as 16-byte packs: the RMSNorm of
// a row and the SwiGLU of an element pair, each rounded as HF transformers rounds (kernels/cuda/rms_norm.h,
// silu_mul.h). rms_norm.cu and silu_mul.cu write their results; fp8.cu quantizes them in the same kernel
// (the FP8 linears' inputs), so both paths produce the same values by construction. Included only by .cu
// files.
#pragma once

#include <cstdint>

#include "kernels/cuda/dense_vec.cuh"

namespace conveyor::cuda_detail {

// How a row of `packs` 16-byte packs spreads over one block: about 256 threads (several rows resident per
// SM), longer rows getting 2, 4 or 8 packs per thread. The threads' share of the sum of squares, and so
// the norm's rounding, follows from it: kernels that must agree use the same configuration.
constexpr int kRowMaxThreads = 512;
constexpr int kRowMaxPacksPerThread = 8;
struct RowPackConfig {
  int packs_per_thread;  // 1, 2, 4 or 8
  int threads;           // a multiple of 32, <= kRowMaxThreads
};
inline bool row_pack_fits(int64_t packs) { return packs <= int64_t{kRowMaxThreads} * kRowMaxPacksPerThread; }
// `packs` over about `threads` threads, 1, 2, 4 or 8 packs each (the fewest that fit).
inline RowPackConfig row_pack_spread(int64_t packs, int64_t threads) {
  const int64_t per = (packs + threads - 1) / threads;
  const int k = per <= 1 ? 1 : per <= 2 ? 2 : per <= 4 ? 4 : 8;
  const int64_t used = (packs + k - 1) / k;
  return {k, static_cast<int>((used + 31) / 32 * 32)};
}
inline RowPackConfig row_pack_config(int64_t packs) { return row_pack_spread(packs, 256); }

// The widest spread of a row over one block (up to kRowMaxThreads threads, the fewest packs each), for a few
// long rows: a batch-1 decode step's SwiGLU row of 14,336 gets 448 threads of 4 packs instead of 224 of 8 on
// its one SM. Only for rows with no sum whose rounding another kernel must match (a max is exact in any order).
inline RowPackConfig row_pack_config_wide(int64_t packs) { return row_pack_spread(packs, kRowMaxThreads); }

// Loads this thread's packs p = threadIdx.x + i * blockDim.x (i < kPacks, p < packs) of row x and
// replaces them with rmsnorm(x) * w: x * rsqrt(mean(x^2) + eps) in fp32, rounded to T, times the weight
// in fp32, rounded again. A block-wide reduction: every thread of the block must call it.
template <typename T, int kPacks>
__device__ __forceinline__ void rms_norm_row(Pack<T> (&row)[kPacks], const T* x, const T* w, int packs, int64_t cols,
                                             float eps, float* scratch) {
  constexpr int kN = Pack<T>::kSize;
  float sum_sq = 0.f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p < packs) {
      row[i] = load_pack(x + static_cast<int64_t>(p) * kN);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const float v = to_f32(row[i].v[j]);
        sum_sq += v * v;
      }
    }
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq, scratch) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p < packs) {
      const Pack<T> wp = load_pack(w + static_cast<int64_t>(p) * kN);
#pragma unroll
      for (int j = 0; j < kN; ++j)
        row[i].v[j] = from_f32<T>(round_to<T>(to_f32(row[i].v[j]) * inv_rms) * to_f32(wp.v[j]));
    }
  }
}

// silu(g) rounded to T, times u in fp32, rounded again.
template <typename T>
__device__ __forceinline__ T silu_mul_one(T g, T u) {
  const float gf = to_f32(g);
  const float act = round_to<T>(gf / (1.f + expf(-gf)));
  return from_f32<T>(act * to_f32(u));
}

}  // namespace conveyor::cuda_detail
