// The CUDA backend: Ops (stages/backend.h) on one GPU and one stream, activations and weights in bf16
// or f16, logits in fp32, each op one launch of kernels/cuda. Ops only enqueue; the host waits in
// download() and in the sampler (one sync per step). Built only with CONVEYOR_WITH_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/gemm.h"
#include "kernels/dtype.h"
#include "stages/backend.h"
#include "stages/cuda/step_metadata.h"

namespace conveyor {

// What the ops' start-up buffers are sized for. The defaults suit tests and tools; a stage passes its
// scheduler limits and the memory plan's pool sizes, so no step within them allocates.
struct CudaOpsSizes {
  StepMetadataLimits metadata;         // max_tokens: rows of the largest GEMM too
  int64_t max_accumulate_cols = 8192;  // widest accumulating GEMM output (the hidden size)
  size_t activation_pool_bytes = 0;    // slab of the activation pool (0: blocks allocated on demand)
  size_t graph_pool_bytes = 0;         // slab of the pool that captured graphs draw from
  GemvPolicy fp8_gemv = GemvPolicy::kAuto;  // runtime.fp8_gemv: the FP8 linears' small-m kernel
};

// Device bytes make_cuda_ops allocates at once for its workspaces (GEMM, attention split-K, step
// metadata), which the memory plan counts under margin.
size_t cuda_ops_workspace_bytes(const CudaOpsSizes& sizes);
// Everything make_cuda_ops allocates at once: the workspaces and both pools' slabs.
size_t cuda_ops_device_bytes(const CudaOpsSizes& sizes);

// Makes `device` current, creates the stream, the GEMM runner, its workspaces and the memory pool.
// dt: kBF16 or kF16.
std::unique_ptr<Ops> make_cuda_ops(int device, DType dt, const CudaOpsSizes& sizes = CudaOpsSizes{});

// Total and free bytes of `device` now.
void cuda_memory_info(int device, size_t* total, size_t* free);

}  // namespace conveyor
