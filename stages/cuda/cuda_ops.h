// The CUDA backend: Ops (stages/backend.h) on one GPU and one stream, activations and weights in bf16
// or f16, logits in fp32, each op one launch of kernels/cuda. Ops only enqueue; the host waits in
// download() and in the sampler (one sync per step). Built only with CONVEYOR_WITH_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/dtype.h"
#include "stages/backend.h"

namespace conveyor {

// What the ops' start-up workspaces are sized for; a step larger than this is an Error, not an
// allocation. The defaults suit tests and tools; a stage passes its scheduler limits.
struct CudaOpsSizes {
  int64_t max_tokens = 8192;           // rows of the largest GEMM (scheduler.max_num_batched_tokens)
  int64_t max_accumulate_cols = 8192;  // widest accumulating GEMM output (the hidden size)
};

// Device bytes make_cuda_ops allocates at once for its workspaces (GEMM and attention split-K),
// which the memory plan counts.
size_t cuda_ops_workspace_bytes(const CudaOpsSizes& sizes);

// Makes `device` current, creates the stream, the GEMM runner, its workspaces and the memory pool.
// dt: kBF16 or kF16.
std::unique_ptr<Ops> make_cuda_ops(int device, DType dt, const CudaOpsSizes& sizes = CudaOpsSizes{});

// Total and free bytes of `device` now.
void cuda_memory_info(int device, size_t* total, size_t* free);

}  // namespace conveyor
