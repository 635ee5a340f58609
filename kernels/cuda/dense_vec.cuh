// Device helpers shared by the dense kernels (rms_norm, silu_mul, embedding, elementwise): storage
// types for each DType, fp32 conversions that round to nearest even, 16-byte packs of elements and a
// block-wide sum. Included only by .cu files; nothing here launches a kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/dtype.h"
#include "runtime/core/error.h"

namespace conveyor::cuda_detail {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// What a value becomes once stored in T: the dtype rounding a framework applies between two ops.
template <typename T>
__device__ __forceinline__ float round_to(float v) { return to_f32(from_f32<T>(v)); }

// Element i of a buffer whose dtype is known only at run time (kBF16, kF16, else kF32), as fp32; and
// the store back, rounding to nearest even. For epilogues and small kernels that take any float dtype.
__device__ __forceinline__ float load_as_f32(const void* p, DType dt, int64_t i) {
  if (dt == DType::kBF16) return to_f32(static_cast<const __nv_bfloat16*>(p)[i]);
  if (dt == DType::kF16) return to_f32(static_cast<const __half*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void store_from_f32(void* p, DType dt, int64_t i, float v) {
  if (dt == DType::kBF16) static_cast<__nv_bfloat16*>(p)[i] = from_f32<__nv_bfloat16>(v);
  else if (dt == DType::kF16) static_cast<__half*>(p)[i] = from_f32<__half>(v);
  else static_cast<float*>(p)[i] = v;
}

// 16 bytes of T: 8 bf16/f16 or 4 f32. Loads and stores compile to one 128-bit access, so the
// pointer must be 16-byte aligned (callers check with is_aligned16 before choosing this path).
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  Pack<T> out;
  *reinterpret_cast<uint4*>(&out) = *reinterpret_cast<const uint4*>(p);
  return out;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&v);
}

inline bool is_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Sum over the block; every thread gets the result. blockDim.x must be a multiple of 32 and <= 1024.
// `scratch` is 32 floats of shared memory; the function syncs before reuse so it may be called twice.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Blocks for a grid-stride loop over n items with `threads` per block: enough to fill any GPU, and
// far below the 2^31-1 limit of gridDim.x.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = int64_t{1} << 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

}  // namespace conveyor::cuda_detail

// Runs the body with `T` bound to the device storage type of a 16-bit float DType (and of f32 when
// allowed). Anything else throws, naming the op.
#define CONVEYOR_DISPATCH_FLOAT(dt, op_name, allow_f32, ...)                                          \
  do {                                                                                                \
    switch (dt) {                                                                                     \
      case ::conveyor::DType::kBF16: {                                                                \
        using T = __nv_bfloat16;                                                                      \
        __VA_ARGS__;                                                                                  \
        break;                                                                                        \
      }                                                                                               \
      case ::conveyor::DType::kF16: {                                                                 \
        using T = __half;                                                                             \
        __VA_ARGS__;                                                                                  \
        break;                                                                                        \
      }                                                                                               \
      case ::conveyor::DType::kF32: {                                                                 \
        CONVEYOR_CHECK(allow_f32, op_name, ": dtype f32 is not supported; use bf16 or f16");          \
        using T = float;                                                                              \
        __VA_ARGS__;                                                                                  \
        break;                                                                                        \
      }                                                                                               \
      default:                                                                                        \
        CONVEYOR_THROW(op_name, ": unsupported dtype ", ::conveyor::dtype_name(dt),                   \
                       "; the CUDA kernels take bf16, f16 (or f32 where noted)");                     \
    }                                                                                                 \
  } while (0)
