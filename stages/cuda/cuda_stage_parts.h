// What a pipeline stage needs from the CUDA backend, built in one place for make_pipeline_stage: the
// ops (dtype from StageOptions::dtype, model.dtype), the sampler on the sampling rank, and the KV blocks this GPU can hold
// (before the minimum over ranks is agreed), with the terms it was computed from (memory_table.h).
#pragma once

#include <memory>
#include <string>

#include "runtime/engine/batch_budget.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_loader.h"
#include "stages/backend.h"
#include "stages/memory_table.h"
#include "stages/plan_sampler.h"
#include "stages/stage_options.h"

namespace conveyor {

// model.dtype on the CUDA backend: auto / bfloat16 / bf16 -> kBF16; float16 / fp16 / half -> kF16;
// float32 is refused (the GEMM and attention kernels take 16-bit inputs).
DType cuda_model_dtype(const std::string& model_dtype);

struct CudaStageParts {
  std::unique_ptr<Ops> ops;
  std::unique_ptr<StageSampler> sampler;  // null unless `samples`
  long long kv_blocks = 0;                // cache.num_blocks, or what gpu_memory_utilization leaves (<= 0: none)
  MemoryRow memory;                       // this rank's row of the start-up memory table
};

// Where the stage runs: its GPU, its stage index, how many ranks share that GPU, and whether its TP
// transport lets decode steps be captured as graphs (tp = 1, or NCCL).
struct CudaPlacement {
  int device = 0;
  int stage = 0;
  int ranks_on_device = 1;
  bool graphs_capturable = true;
};

// The step budget this rank would choose (choose_batch with `request`) before its ops exist: the memory in
// use is measured once (the CUDA context, NCCL buffers; a world barrier first), and each candidate's KV
// room is what gpu_memory_utilization leaves after the terms make_cuda_stage_parts reserves for that
// candidate (cache.num_blocks, when set, is the room of all). Collective over MPI_COMM_WORLD unless
// opt.num_blocks > 0; the caller agrees the minimum over ranks and sizes the parts with it.
BatchChoice choose_cuda_batch(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                              const WeightSet& weights, const PagedKvShape& kv, bool samples,
                              const CudaPlacement& place, const BudgetRequest& request);

// weights: this rank's share, not yet uploaded (their size is reserved before the KV budget).
// The rank plans with opt.gpu_share(ranks_on_device) of the GPU and counts its share of what is in use
// once every rank of the world has made its ops (a world barrier: collective over MPI_COMM_WORLD).
CudaStageParts make_cuda_stage_parts(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                                     const WeightSet& weights, const PagedKvShape& kv, bool samples,
                                     const CudaPlacement& place);

}  // namespace conveyor
