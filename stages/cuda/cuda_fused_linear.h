// bf16/f16 decode linears whose input is the op before's output: the pre-norm (rms_norm_linear) or the SwiGLU
// (silu_mul_linear). Where the gemv kernel wins the shape's race against cuBLASLt (GemmRunner::picks_gemv) and
// takes the fused input (gemv.h: gemv_fused_takes), the gemv makes that input itself (gemv_rms_norm_cuda,
// gemv_silu_mul_cuda): y is the two kernels' bit for bit, with one kernel and its boundary fewer per linear.
// CONVEYOR_FUSED_GEMV=0 keeps the two kernels, for A/B timings. Read once.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/gemm.h"
#include "stages/backend.h"

namespace conveyor {

// out (+)= f(src) W^T (+ bias), f = rms_norm with `norm`, or silu_mul when norm is nullptr (src = gate|up, [m, 2k]).
// Runs it and returns true where the fused gemv takes it; returns false, having run nothing but the shape's
// planning, where the caller's two ops must run.
bool fused_gemv_linear(GemmRunner& gemm, DType dt, const TensorView& out, const TensorView& src, const NormView* norm,
                       const TensorView& w, const TensorView& bias, bool accumulate, cudaStream_t stream);

}  // namespace conveyor
