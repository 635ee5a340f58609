// RMSNorm on the GPU, the twin of kernels/cpu/rms_norm.h. Rounding follows HF transformers exactly:
// x_norm = x * rsqrt(mean(x^2) + eps) in fp32, rounded to dt, then multiplied by the weight in fp32
// and rounded again. The residual add is not here: it rides the GEMM (accumulate in kernels/cuda/gemm.h).
// Enqueue only; pointers are device pointers, rows contiguous.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace conveyor {

// out[r, :] = rmsnorm(x[r, :]) * w. dt: kBF16, kF16 or kF32. out may alias x.
void rms_norm_cuda(void* out,        // [rows, cols]
                   const void* x,    // [rows, cols]
                   const void* w,    // [cols]
                   int64_t rows, int64_t cols, float eps, DType dt, cudaStream_t s);

}  // namespace conveyor
