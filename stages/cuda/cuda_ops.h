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

// Bytes of `device` memory the KV cache may take: utilization * total, minus what is in use now,
// minus `reserved` (weights still to upload, activations, sampler buffers); 0 when nothing is left.
size_t cuda_kv_budget_bytes(int device, double utilization, size_t reserved);

}  // namespace conveyor
