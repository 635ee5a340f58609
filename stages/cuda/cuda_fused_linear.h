// bf16/f16 decode linears whose input is the op before's output: the pre-norm (rms_norm_linear) or the SwiGLU
// (silu_mul_linear). Where the gemv kernel wins the shape's race against cuBLASLt (GemmRunner::picks_gemv) and
// takes the fused input (gemv.h: gemv_fused_takes), the gemv makes that input itself (gemv_rms_norm_cuda,
// gemv_silu_mul_cuda): y is the two kernels' bit for bit, with one kernel and its boundary fewer per linear.
// Off unless CONVEYOR_FUSED_GEMV=1 (read once): on an H100 batch 1 bf16 took 0.7654-0.7742 s with it against
// 0.7429-0.7467 s without (benchmarks/results/nvidia-h100/2026-12-07-r15): every block makes x before its first
// weight load, which costs what the kernel boundary saved (gate|up: 83.1 us fused against 79.3 + 3.9 us apart,
// kernels alone), and a block per tile or the first tile prefetched into L2 before the PDL wait were slower still.
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
