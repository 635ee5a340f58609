// Small-m GEMM ("GEMV") for decode: y[m, n] = x[m, k] * w[n, k]^T (+ bias) (+ y) for m <= 16 tokens,
// the weight-bandwidth-bound case where cuBLASLt loses time to ramp-up, tails and split-K reduction
// launches. w is streamed from HBM exactly once in 16-byte loads; one launch, no workspace. It is a
// GemmRunner candidate (gemm.h), timed against cuBLASLt on a shape's first use.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace conveyor {

constexpr int64_t kGemvMaxRows = 16;  // largest m (tokens) the kernel takes

// y[t, j] = sum_i x[t, i] * w[j, i] (+ bias[j]) (+ y[t, j] if accumulate), summed in fp32 and
// rounded once to `out`. x, w and bias are in dt (kBF16 or kF16); out is dt or kF32.
// Requires 1 <= m <= kGemvMaxRows, n >= 1, k % 8 == 0, x and w 16-byte aligned, compute capability
// >= 8.0 (tensor-core mma). y has no alignment requirement and must not alias x, w or bias.
void gemv_cuda(void* y, DType out,     // [m, n]
               const void* x,          // [m, k]
               const void* w,          // [n, k]
               const void* bias,       // [n] or nullptr
               int64_t m, int64_t n, int64_t k, bool accumulate, DType dt, cudaStream_t stream);

}  // namespace conveyor
