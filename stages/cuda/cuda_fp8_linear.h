// FP8 linears of the CUDA backend: weights uploaded as e4m3 codes (kU8) plus fp32 per-row scales,
// and the linear itself: x quantized per token (or with the static input scale), then either the
// cuBLASLt e4m3 GEMM into an fp32 scratch and the scale epilogue into out (bias added, or
// accumulated into the residual for linear_add), or, for decode's m <= kGemvMaxRows tokens, the FP8
// gemv kernel that reads the codes once and writes out directly; the two are timed per shape
// (Fp8GemmRunner::small_m_choice).
#pragma once

#include <functional>

#include "kernels/cuda/fp8.h"
#include "stages/backend.h"

namespace conveyor {

// Uploads on `stream` and waits (load time only); the host codes are freed on return.
Tensor upload_fp8_weight(Fp8HostWeight&& w, cudaStream_t stream);

// out = x W^T (+ bias) or out += x W^T (accumulate); scratch comes from ops.empty.
void fp8_linear_cuda(Ops& ops, Fp8GemmRunner& gemm, const TensorView& out, const TensorView& x, const TensorView& w,
                     const TensorView& bias, bool accumulate, cudaStream_t stream);

// Writes the e4m3 codes [m, k] and per-token scales [m] of a linear's input (with w.input_scale when
// it is static), on the linear's stream.
using Fp8Quantizer = std::function<void(uint8_t* codes, float* scales)>;

// fp8_linear_cuda for an input [m, k] that `quantize` produces: a fused producer (the pre-norm, the
// SwiGLU) writes the codes and scales itself, and the input's 16-bit rows are never stored.
void fp8_linear_quantized_cuda(Ops& ops, Fp8GemmRunner& gemm, const TensorView& out, int64_t m, int64_t k,
                               const Fp8Quantizer& quantize, const TensorView& w, const TensorView& bias,
                               bool accumulate, cudaStream_t stream);

}  // namespace conveyor
