// SwiGLU on the GPU, the twin of kernels/cpu/silu_mul.h: the input is the fused gate_up projection
// (gate half first). Rounding follows HF transformers: silu(gate) is rounded to dt, then multiplied
// by up in fp32 and rounded again. Enqueue only; device pointers, rows contiguous.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace conveyor {

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i]. dt: kBF16, kF16 or kF32.
// out must not alias gate_up.
void silu_mul_cuda(void* out,            // [tokens, inter]
                   const void* gate_up,  // [tokens, 2 * inter]
                   int64_t tokens, int64_t inter, DType dt, cudaStream_t s);

}  // namespace conveyor
