// What a pipeline stage needs from the CUDA backend, built in one place for make_pipeline_stage: the
// ops (dtype from StageOptions::dtype, model.dtype), the sampler on the sampling rank, and the KV blocks this GPU can hold
// (before the minimum over ranks is agreed), with the terms it was computed from (memory_table.h).
#pragma once

#include <memory>
#include <string>

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

// weights: this rank's share, not yet uploaded (their size is reserved before the KV budget).
CudaStageParts make_cuda_stage_parts(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                                     const WeightSet& weights, const PagedKvShape& kv, bool samples, int device,
                                     int stage);

}  // namespace conveyor
