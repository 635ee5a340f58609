// StageOptions: every configuration value the stages read, taken from the string-keyed Config once
// (StageOptions::from_config) so that pipeline stages, the CPU runner and the CUDA parts take typed
// fields and no stage code names a config key. Field comments name the key each one comes from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "runtime/engine/batch_budget.h"
#include "runtime/model/weight_loader.h"

namespace conveyor {

class Config;

// The GPU candidates within the decode graphs' reach: with CUDA graphs each micro-batch's decode step is
// one graph of at most kMaxDecodeBucket sequences (stages/decode_buckets.h), so an auto batch stays at or
// below that times the micro-batches; a larger one would decode eagerly, and whether it wins is for a
// measurement to say, not the default. Without graphs: gpu_batch_rule().
BatchRule gpu_batch_rule_for(bool cuda_graphs, int micro_batches);

struct StageOptions {
  // parallel.*: the layout and its layer split
  int pipeline = 1;                // parallel.pipeline
  int tensor = 1;                  // parallel.tensor
  int micro_batches = 0;           // parallel.micro_batches (0: one per stage, micro_batches_for)
  std::vector<int64_t> partition;  // parallel.partition (empty: the planner's min-max split)
  std::string device_profile;      // parallel.device_profile: doctor JSON the split is planned with
  // scheduler.*: the largest step a stage must hold (0: auto, chosen from the KV room by choose_batch)
  int64_t max_num_seqs = 0;            // scheduler.max_num_seqs
  int64_t max_num_batched_tokens = 0;  // scheduler.max_num_batched_tokens
  int64_t workload_seq_len = 0;  // prompt + output tokens of the command's workload (bench); 0: unknown
  // cache.*: KV blocks
  int block_size = 16;                  // cache.block_size
  long long num_blocks = 0;             // cache.num_blocks (0: from memory)
  double cpu_kv_cache_space_gib = 4.0;  // cache.cpu_kv_cache_space
  double gpu_memory_utilization = 0.9;  // cache.gpu_memory_utilization
  double gpu_memory_utilization_per_rank = 0;  // cache.gpu_memory_utilization_per_rank (0: unset)
  std::string kv_cache_dtype = "auto";  // cache.kv_cache_dtype (fp8_e5m2 and other FP8 flavours refused)
  bool calculate_kv_scales = false;     // cache.calculate_kv_scales
  // model.*
  std::string dtype = "auto";  // model.dtype (CUDA backend)
  int64_t max_model_len = 0;   // model.max_model_len (0: the model's context length)
  std::string quantization = "none";  // model.quantization
  WeightOrigin weights;        // model.load_format == dummy, model.path, runtime.seed
  // runtime.*
  bool cuda_graphs = true;     // runtime.cuda_graphs
  bool gemm_warmup = true;     // runtime.gemm_warmup
  std::string fp8_gemv = "auto";  // runtime.fp8_gemv: auto | off | on
  int64_t profile_step = -1;   // runtime.profile_step

  static StageOptions from_config(const Config& config);
  // The share of its GPU's memory one rank plans with: the per-rank key when set, else
  // gpu_memory_utilization divided among the ranks on that GPU.
  double gpu_share(int ranks_on_device) const;
  // The spec with model.quantization applied (what every stage builds, plans and loads).
  ModelSpec quantized(const ModelSpec& spec) const;
  // What choose_batch needs from these options: the scheduler keys, the expected sequence length
  // (expected_seq_len of workload_seq_len within the model's context), the block size.
  BudgetRequest batch_request(const ModelSpec& spec, const BatchRule& rule) const;
  // gpu_batch_rule_for this run's runtime.cuda_graphs and micro-batches.
  BatchRule gpu_rule() const;
  // These options with the step budget a run chose (both keys > 0), as the stages size their buffers.
  StageOptions with_batch(const BatchBudget& budget) const;
  // cache.kv_cache_dtype fp8 / fp8_e4m3: K and V stored as e4m3 codes with per-tensor scales.
  bool kv_fp8() const { return kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3"; }
  // What one cached K or V element takes next to activations of `activations`: 1 byte for FP8, else the
  // activation size (the CUDA stage checks the other choices against model.dtype; the CPU keeps fp32).
  // The one place a KV element size is decided: the caches, the memory plans and the partitioner ask it.
  size_t kv_elem_bytes(DType activations) const { return kv_fp8() ? 1 : dtype_size(activations); }
  DType kv_storage(DType activations) const { return kv_fp8() ? DType::kU8 : activations; }
};

}  // namespace conveyor
