// make_cuda_stage_parts (see cuda_stage_parts.h). The KV budget is gpu_memory_utilization x total memory
// minus what is in use once the ops exist (CUDA context, NCCL buffers), minus what is still to come:
// the weights (uploaded by the stage right after), activations of the largest step, the LM head's
// logits and the sampler's workspace, the ops' GEMM, attention and metadata workspaces and their
// activation pools' slabs (allocated at start-up, so no step allocates them), and a fixed margin for
// fragmentation and library state. choose_cuda_batch asks the same plan per candidate step budget, before
// the ops exist.
#include "stages/cuda/cuda_stage_parts.h"

#include <mpi.h>

#include <algorithm>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "kernels/cuda/sampling.h"
#include "stages/architecture.h"
#include "stages/cuda/cuda_ops.h"
#include "stages/cuda/cuda_stage_sampler.h"
#include "stages/gpu_reserve.h"
#include "stages/kv_cache.h"
#include "stages/weight_bank.h"

namespace conveyor {
namespace {

// The activation pools and the logits: gpu_reserve (stages/gpu_reserve.h), the rule `conveyor plan` shares.
GpuReserve pools(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share, size_t elem,
                 bool graphs_capturable) {
  return gpu_reserve(spec, share.tp_size, share.lm_head, opt.max_num_batched_tokens, opt.max_num_seqs, elem,
                     opt.cuda_graphs && graphs_capturable);
}

// What the ops' start-up buffers are made for: the largest step's tokens and sequences, the longest
// block table, the hidden width (the residual GEMMs accumulate into [tokens, hidden]), the pools.
CudaOpsSizes ops_sizes(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share, size_t elem,
                       bool graphs_capturable) {
  CudaOpsSizes sizes;
  sizes.metadata.max_tokens = opt.max_num_batched_tokens;
  sizes.metadata.max_seqs = opt.max_num_seqs;
  const int64_t context = spec.context_len(opt.max_model_len);
  sizes.metadata.max_blocks_per_seq = (context + opt.block_size - 1) / opt.block_size;
  sizes.max_accumulate_cols = model_traits(spec, share.tp_size).hidden;
  const GpuReserve r = pools(opt, spec, share, elem, graphs_capturable);
  sizes.activation_pool_bytes = r.activations;
  sizes.graph_pool_bytes = r.graph_pool;
  sizes.fp8_gemv = opt.fp8_gemv == "on" ? GemvPolicy::kAlways : opt.fp8_gemv == "auto" ? GemvPolicy::kAuto
                                                                                       : GemvPolicy::kNever;
  return sizes;
}

int sampler_rows(const StageOptions& opt) {
  return static_cast<int>(std::min<long long>(opt.max_num_seqs, kMaxSamplerRows));
}

// Fills the reserved terms of `row` (weights, activations, sampling, graphs, margin).
void reserve(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share, const WeightSet& weights,
             bool samples, size_t elem, bool graphs_capturable, MemoryRow& row) {
  // The set is lazy: bytes() is the fp32 size it will yield, not memory it holds.
  const size_t weight_bytes = device_weight_bytes(weights, spec.quant.fp8_linears(), elem);
  const GpuReserve r = pools(opt, spec, share, elem, graphs_capturable);
  // CudaSampler: the workspace make_cuda_stage_sampler allocates.
  const size_t sampler = samples ? cuda_sampler_workspace_bytes(spec.vocab, sampler_rows(opt)) : 0;
  row.weights = static_cast<double>(weight_bytes);
  row.activations = static_cast<double>(r.activations);
  row.sampling = static_cast<double>(r.logits + sampler);
  row.graphs = static_cast<double>(r.graphs);
  row.margin = static_cast<double>(kGpuFixedMargin + cuda_ops_workspace_bytes(ops_sizes(opt, spec, share, elem, graphs_capturable)));
}

}  // namespace

DType cuda_model_dtype(const std::string& d) {
  if (d == "auto" || d == "bfloat16" || d == "bf16") return DType::kBF16;
  if (d == "float16" || d == "fp16" || d == "half") return DType::kF16;
  CONVEYOR_THROW("model.dtype = ", d, " is not supported on the CUDA backend (its GEMM and attention kernels take "
                 "16-bit inputs); use bfloat16 or float16, or --set runtime.backend=cpu for fp32");
}

BatchChoice choose_cuda_batch(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                              const WeightSet& weights, const PagedKvShape& kv, bool samples,
                              const CudaPlacement& place, const BudgetRequest& request) {
  if (opt.num_blocks > 0) return choose_batch(request, static_cast<int64_t>(opt.num_blocks) * kv.block_size);
  const DType dt = cuda_model_dtype(opt.dtype);
  const size_t elem = dtype_size(dt);
  const int layers = std::max(1, static_cast<int>(share.last_layer - share.first_layer));
  // No rank has made its ops yet: what is in use now is the context and the NCCL buffers, and the ops'
  // buffers are among each candidate's reserved terms (make_cuda_stage_parts measures again after them).
  CONVEYOR_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  size_t total = 0, free = 0;
  cuda_memory_info(place.device, &total, &free);
  MemoryRow base;
  base.total = static_cast<double>(total);
  base.allowed = opt.gpu_share(place.ranks_on_device) * base.total;
  base.in_use = static_cast<double>(total - free) / place.ranks_on_device;
  const auto room = [&](const BatchBudget& b) {
    MemoryRow row = base;
    reserve(opt.with_batch(b), spec, share, weights, samples, elem, place.graphs_capturable, row);
    const size_t budget = row.left() > 0 ? static_cast<size_t>(row.left()) : 0;
    const int blocks = KvCache::blocks_that_fit(budget, layers, kv.block_size, kv.n_kv_heads, kv.head_dim,
                                                opt.kv_elem_bytes(dt));
    return static_cast<int64_t>(blocks) * kv.block_size;
  };
  return choose_batch(request, room);
}

CudaStageParts make_cuda_stage_parts(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                                     const WeightSet& weights, const PagedKvShape& kv, bool samples,
                                     const CudaPlacement& place) {
  const int device = place.device;
  const int ranks_on_device = place.ranks_on_device;
  const DType dt = cuda_model_dtype(opt.dtype);
  const std::string& kv_dtype = opt.kv_cache_dtype;
  CONVEYOR_CHECK(kv_dtype == "auto" || opt.kv_fp8() || cuda_model_dtype(kv_dtype) == dt, "cache.kv_cache_dtype = ",
                 kv_dtype, " differs from the model dtype ", dtype_name(dt),
                 "; the CUDA attention kernels keep the KV cache in the model dtype or FP8: use auto or fp8");
  CudaStageParts parts;
  const CudaOpsSizes sizes = ops_sizes(opt, spec, share, dtype_size(dt), place.graphs_capturable);
  parts.ops = make_cuda_ops(device, dt, sizes);
  // Ranks sharing a GPU measure after all of them hold their context and workspaces; every rank of the
  // world comes here (make_pipeline_stage is collective), whatever its own device's count.
  CONVEYOR_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  // The sampler's workspace is allocated after memory is measured: the plan reserves it (sampling).
  auto add_sampler = [&] {
    if (samples) parts.sampler = make_cuda_stage_sampler(parts.ops->stream(), spec.vocab, sampler_rows(opt));
    return std::move(parts);
  };
  parts.kv_blocks = opt.num_blocks;
  parts.memory.kv_blocks = parts.kv_blocks;
  if (parts.kv_blocks > 0) return add_sampler();
  const size_t elem = dtype_size(dt);
  const double util = opt.gpu_share(ranks_on_device);
  MemoryRow& row = parts.memory;
  row.kv_elem_bytes = static_cast<int>(opt.kv_elem_bytes(dt));
  row.fp8_weights = spec.quant.fp8_linears();
  row.ranks_on_device = ranks_on_device;
  row.rank = process_identity().rank;
  row.host = process_identity().host;
  row.stage = place.stage;
  row.tp_rank = share.tp_rank;
  row.device = device;
  reserve(opt, spec, share, weights, samples, elem, place.graphs_capturable, row);
  size_t total = 0, free = 0;
  cuda_memory_info(device, &total, &free);
  row.total = static_cast<double>(total);
  row.allowed = util * row.total;
  // The ops' workspaces and pool slabs already exist; the plan names them under margin, activations and
  // graphs, not under in_use (of which a rank sharing its GPU counts its share).
  row.in_use = static_cast<double>(total - free) / ranks_on_device - static_cast<double>(cuda_ops_device_bytes(sizes));
  const size_t budget = row.left() > 0 ? static_cast<size_t>(row.left()) : 0;
  const int layers = static_cast<int>(share.last_layer - share.first_layer);
  const PagedKvShape one_block{1, kv.block_size, kv.n_kv_heads, kv.head_dim};
  row.kv_block_bytes = static_cast<double>(KvCache::bytes_needed(std::max(layers, 1), one_block, opt.kv_storage(dt)));
  parts.kv_blocks = KvCache::blocks_that_fit(budget, layers, kv.block_size, kv.n_kv_heads, kv.head_dim,
                                             opt.kv_elem_bytes(dt));
  row.kv_blocks = parts.kv_blocks;
  return add_sampler();
}

}  // namespace conveyor
