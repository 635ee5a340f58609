// FP8 quantization and epilogue kernels (see fp8.h). Encoding uses the hardware conversion with
// satfinite (round to nearest even, +-448 on overflow, NaN -> 0x7f), which is what the CPU twin
// emulates bit for bit; the division x / s is IEEE (no fast math), as on the CPU.
#include "kernels/cuda/fp8.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cfloat>

#include "kernels/cuda/dense_vec.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using cuda_detail::load_as_f32;
using cuda_detail::store_from_f32;

constexpr int kThreads = 256;

// satfinite already clamps to +-448 (as the twin's clamp does); an explicit fminf/fmaxf clamp would turn
// NaN into -448, where the twin keeps it NaN.
__device__ __forceinline__ uint8_t encode(float x, float s) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, s), __NV_SATFINITE, __NV_E4M3));
}

// The row's scale, for every thread of the block: static_scale when > 0, else the block's amax (each
// thread's `amax` reduced through `partial`, one float per warp) over 448, a zero scale replaced by
// fp32 epsilon. Thread 0 also stores it in scales[blockIdx.x].
template <int kWarps>
__device__ __forceinline__ float block_row_scale(float amax, float static_scale, float* scales) {
  __shared__ float partial[kWarps];
  __shared__ float row_scale;
  if (static_scale > 0.0f) {
    if (threadIdx.x == 0) row_scale = static_scale;
  } else {
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = amax;
    __syncthreads();
    if (threadIdx.x == 0) {
      float m = 0.0f;
      for (int w = 0; w < kWarps; ++w) m = fmaxf(m, partial[w]);
      const float s = __fdiv_rn(m, 448.0f);
      row_scale = s == 0.0f ? FLT_EPSILON : s;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) scales[blockIdx.x] = row_scale;
  return row_scale;
}

// One block per row: the row's amax (block reduction), then its codes.
__global__ void quantize_rows_kernel(uint8_t* q, float* scales, const void* x, DType dt, int64_t cols,
                                     float static_scale) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  if (static_scale <= 0.0f)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) amax = fmaxf(amax, fabsf(load_as_f32(x, dt, base + c)));
  const float s = block_row_scale<kThreads / 32>(amax, static_scale, scales);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) q[base + c] = encode(load_as_f32(x, dt, base + c), s);
}

// Decode's few rows: one block of kHeldThreads per row, each thread holding its up to kHeld values in
// registers, so x is read once (the kernel above reads it twice with a quarter of the threads). The
// same amax, scale and encoding, so the same codes.
constexpr int kHeldThreads = 1024;
constexpr int kHeld = 16;  // values per thread: rows of up to 16,384 columns
constexpr int64_t kHeldMaxRows = 64;

__global__ void __launch_bounds__(kHeldThreads)
    quantize_rows_held_kernel(uint8_t* q, float* scales, const void* x, DType dt, int64_t cols, float static_scale) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float v[kHeld];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kHeldThreads;
    v[i] = c < cols ? load_as_f32(x, dt, base + c) : 0.0f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  const float s = block_row_scale<kHeldThreads / 32>(amax, static_scale, scales);
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kHeldThreads;
    if (c < cols) q[base + c] = encode(v[i], s);
  }
}

__global__ void epilogue_kernel(void* y, DType out, const float* acc, const float* a_scale, const float* b_scale,
                                const void* bias, DType bias_dt, int64_t m, int64_t n, bool accumulate) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m * n) return;
  const int64_t row = i / n, col = i % n;
  float v = acc[i] * a_scale[row] * b_scale[col] + (bias ? load_as_f32(bias, bias_dt, col) : 0.0f);
  if (accumulate) v += load_as_f32(y, out, i);
  store_from_f32(y, out, i, v);
}

}  // namespace

void quantize_rows_fp8_cuda(uint8_t* q, float* scales, const void* x, DType dt, int64_t rows, int64_t cols,
                            float static_scale, cudaStream_t stream) {
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kF32, "quantize_rows_fp8_cuda: x is ",
                 dtype_name(dt), ", expected bf16, f16 or f32");
  if (rows == 0) return;
  if (rows <= kHeldMaxRows && cols <= static_cast<int64_t>(kHeld) * kHeldThreads) {
    quantize_rows_held_kernel<<<static_cast<unsigned>(rows), kHeldThreads, 0, stream>>>(q, scales, x, dt, cols,
                                                                                        static_scale);
  } else {
    quantize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(q, scales, x, dt, cols, static_scale);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

void fp8_scale_epilogue_cuda(void* y, DType out, const float* acc, const float* a_scale, const float* b_scale,
                             const void* bias, DType bias_dt, int64_t m, int64_t n, bool accumulate,
                             cudaStream_t stream) {
  if (m * n == 0) return;
  const unsigned blocks = static_cast<unsigned>((m * n + kThreads - 1) / kThreads);
  epilogue_kernel<<<blocks, kThreads, 0, stream>>>(y, out, acc, a_scale, b_scale, bias, bias_dt, m, n, accumulate);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace conveyor
