// The CUDA backend: Ops (stages/backend.h) on one GPU and one stream, activations and weights in bf16
// or f16, logits in fp32, each op one launch of kernels/cuda. Ops only enqueue; the host waits in
// download() and in the sampler (one sync per step). Built only with CONVEYOR_WITH_CUDA.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/dtype.h"
#include "stages/backend.h"

namespace conveyor {

// Makes `device` current, creates the stream, the GEMM runner and the memory pool. dt: kBF16 or kF16.
std::unique_ptr<Ops> make_cuda_ops(int device, DType dt);

// Total and free bytes of `device` now.
void cuda_memory_info(int device, size_t* total, size_t* free);

}  // namespace conveyor
