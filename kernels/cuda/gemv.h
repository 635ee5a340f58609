// Small-m GEMM ("GEMV") for decode: y[m, n] = x[m, k] * w[n, k]^T (+ bias) (+ y) for m <= 16 tokens,
// the weight-bandwidth-bound case where cuBLASLt loses time to ramp-up, tails and split-K reduction
// launches. w is streamed from HBM exactly once in 16-byte loads; one launch, no workspace. It is a
// GemmRunner candidate (gemm.h), timed against cuBLASLt on a shape's first use. The same kernel reads
// FP8 (e4m3) weights and per-token quantized activations (fp8_gemv_cuda), the small-m side of the FP8
// linear (stages/cuda/cuda_fp8_linear.h), timed there against cuBLASLt's e4m3 GEMM plus its epilogue.
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

// The gemv with its input made in the kernel from the op before (each block in shared memory, rounded as the
// op's own kernel rounds it, so y equals the two-kernel path's bit for bit; one kernel boundary fewer):
// gemv_rms_norm_cuda: x = rms_norm_cuda(x, norm_w, eps) ([m, k], norm_w [k]); gemv_silu_mul_cuda: x =
// silu_mul_cuda(gate_up) (gate_up [m, 2k]: gate then up). The rest as gemv_cuda. Both require
// gemv_fused_takes(norm, m, n, k, dt): bf16/f16, m <= kGemvFusedMaxRows, x's m x k x 2 bytes <=
// kGemvFusedMaxBytes, and for the norm a block with the threads rms_norm_cuda spreads a row over.
constexpr int64_t kGemvFusedMaxRows = 8;
constexpr size_t kGemvFusedMaxBytes = 96 * 1024;
bool gemv_fused_takes(bool norm, int64_t m, int64_t n, int64_t k, DType dt);
void gemv_rms_norm_cuda(void* y, DType out, const void* x, const void* norm_w, float eps, const void* w,
                        const void* bias, int64_t m, int64_t n, int64_t k, bool accumulate, DType dt,
                        cudaStream_t stream);
void gemv_silu_mul_cuda(void* y, DType out, const void* gate_up, const void* w, const void* bias, int64_t m, int64_t n,
                        int64_t k, bool accumulate, DType dt, cudaStream_t stream);

// y[t, j] = (sum_i e4m3(x[t, i]) e4m3(w[j, i])) * x_scale[t] * w_scale[j] (+ bias[j]) (+ y[t, j] if
// accumulate): the FP8 linear of kernels/cpu/fp8.h (matmul_fp8_ref) for m <= kGemvMaxRows, products
// exact and summed in fp32, rounded once to `out` (kBF16, kF16 or kF32); bias in `out` or kF32.
// Requires k % 16 == 0, x and w 16-byte aligned, compute capability >= 8.9 (e4m3 mma).
void fp8_gemv_cuda(void* y, DType out,        // [m, n]
                   const uint8_t* x,          // [m, k] e4m3 codes
                   const float* x_scale,      // [m]
                   const uint8_t* w,          // [n, k] e4m3 codes
                   const float* w_scale,      // [n]
                   const void* bias, DType bias_dt,  // [n] or nullptr
                   int64_t m, int64_t n, int64_t k, bool accumulate, cudaStream_t stream);

}  // namespace conveyor
