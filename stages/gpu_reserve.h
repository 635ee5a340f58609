// What a CUDA rank keeps in device memory beside its weights and its KV blocks, as a pure rule of the
// model, the rank's share and the step budget. make_cuda_stage_parts (stages/cuda/cuda_stage_parts.cpp)
// reserves these terms with its measured workspaces and context; the partitioner, `conveyor plan` and the
// schedule simulator, which have no GPU at hand, subtract gpu_reserve_estimate from a GPU's memory before
// they count its KV room, so they choose the batch a run chooses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/model/spec.h"

namespace conveyor {

// Fragmentation and library state, beside the counted workspaces.
constexpr size_t kGpuFixedMargin = size_t{1} << 30;
// The sampler launches at most this many rows (bigger plans loop).
constexpr int kMaxSamplerRows = 256;

struct GpuReserve {
  // Activation pools: live at once inside a layer are the residual, normed input, q, k, v, attention out,
  // o/down out, gate_up and the activation, x2 for the pool's size classes and blocks cached from other
  // shapes; the eager pool for the largest step (max_tokens), the graphs' pool for one padded decode step
  // (the largest bucket max_seqs pads to) with each bucket's hidden states and logits, and the graphs'
  // input rows in the eager pool.
  size_t activations = 0;
  size_t graph_pool = 0;  // the CudaOps slab of the graphs (0 without graphs)
  size_t graphs = 0;      // graph_pool plus the graphs' input rows
  size_t logits = 0;      // the last stage's logits and their TP gather (the sampler's workspace apart)
};

// tp: the rank's TP group size; elem: bytes of an activation element; graphs: CUDA graphs on and the TP
// transport capturable.
GpuReserve gpu_reserve(const ModelSpec& spec, int tp, bool lm_head, int64_t max_tokens, int64_t max_seqs,
                       size_t elem, bool graphs);

// Without a GPU: the terms above plus the fixed margin, ~0.1 GiB of GEMM, attention and metadata
// workspaces and ~1.8 GiB of CUDA context, cuBLAS and NCCL state (both as measured on one H200's rank:
// benchmarks/results/nvidia-h200/2026-12-05/round2/b64_tput.txt).
double gpu_reserve_estimate(const ModelSpec& spec, int tp, bool lm_head, int64_t max_tokens, int64_t max_seqs,
                            size_t elem, bool graphs);

}  // namespace conveyor
