// StageOptions::from_config (see stage_options.h): the only stages/ file that reads config keys.
#include "stages/stage_options.h"

#include <algorithm>

#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "stages/decode_buckets.h"
#include "stages/partitioner.h"

namespace conveyor {
namespace {

// vLLM's other FP8 KV choices are refused by name, with why, rather than run as something else.
void check_kv_cache_dtype(const std::string& d) {
  const char* why = d == "fp8_e5m2"     ? "conveyor stores FP8 KV as e4m3 (3 mantissa bits and a per-tensor scale, "
                                          "what FP8 checkpoints calibrate their k_scale/v_scale for); e5m2 trades "
                                          "that precision for a range the scales already give"
                    : d == "fp8_inc"    ? "it is Intel Gaudi's FP8 KV format"
                    : d == "fp8_ds_mla" ? "it is the DeepSeek MLA cache layout, for models conveyor does not run"
                                        : nullptr;
  if (why) CONVEYOR_THROW("cache.kv_cache_dtype = ", d, " is not supported: ", why, "; use fp8 (= fp8_e4m3) or auto");
}

}  // namespace

StageOptions StageOptions::from_config(const Config& c) {
  StageOptions o;
  o.pipeline = static_cast<int>(c.get_int("parallel.pipeline"));
  o.tensor = static_cast<int>(c.get_int("parallel.tensor"));
  o.micro_batches = static_cast<int>(c.get_int("parallel.micro_batches"));
  o.partition = c.get_int_list("parallel.partition");
  o.device_profile = c.get_string("parallel.device_profile");
  o.max_num_seqs = c.get_int("scheduler.max_num_seqs");
  o.max_num_batched_tokens = c.get_int("scheduler.max_num_batched_tokens");
  o.block_size = static_cast<int>(c.get_int("cache.block_size"));
  o.num_blocks = c.get_int("cache.num_blocks");
  o.cpu_kv_cache_space_gib = c.get_float("cache.cpu_kv_cache_space");
  o.gpu_memory_utilization = c.get_float("cache.gpu_memory_utilization");
  o.gpu_memory_utilization_per_rank = c.get_float("cache.gpu_memory_utilization_per_rank");
  o.kv_cache_dtype = c.get_string("cache.kv_cache_dtype");
  o.calculate_kv_scales = c.get_bool("cache.calculate_kv_scales");
  check_kv_cache_dtype(o.kv_cache_dtype);
  o.quantization = c.get_string("model.quantization");
  o.dtype = c.get_string("model.dtype");
  o.max_model_len = c.get_int("model.max_model_len");
  o.weights.dummy = c.get_string("model.load_format") == "dummy";
  o.weights.path = c.get_string("model.path");
  o.weights.seed = static_cast<uint64_t>(c.get_int("runtime.seed"));
  o.weights.check_finite = c.get_bool("model.check_finite");
  o.cuda_graphs = c.get_bool("runtime.cuda_graphs");
  o.gemm_warmup = c.get_bool("runtime.gemm_warmup");
  o.fp8_gemv = c.get_string("runtime.fp8_gemv");
  o.profile_step = c.get_int("runtime.profile_step");
  return o;
}

double StageOptions::gpu_share(int ranks_on_device) const {
  if (gpu_memory_utilization_per_rank > 0) return gpu_memory_utilization_per_rank;
  return gpu_memory_utilization / (ranks_on_device > 1 ? ranks_on_device : 1);
}

BatchRule gpu_batch_rule_for(bool cuda_graphs, int micro_batches) {
  BatchRule r = gpu_batch_rule();
  if (!cuda_graphs) return r;
  const int64_t cap = int64_t{kMaxDecodeBucket} * std::max(1, micro_batches);
  std::vector<int64_t>& c = r.seq_candidates;
  c.erase(std::remove_if(c.begin(), c.end(), [cap](int64_t n) { return n > cap; }), c.end());
  if (c.empty() || c.front() != cap) c.insert(c.begin(), cap);
  return r;
}

BatchRule StageOptions::gpu_rule() const {
  return gpu_batch_rule_for(cuda_graphs, micro_batches_for(micro_batches, pipeline));
}

BudgetRequest StageOptions::batch_request(const ModelSpec& spec, const BatchRule& rule) const {
  BudgetRequest r;
  r.user = {max_num_seqs, max_num_batched_tokens};
  r.seq_len = expected_seq_len(workload_seq_len, spec.context_len(max_model_len));
  r.block_size = block_size;
  r.rule = rule;
  return r;
}

StageOptions StageOptions::with_batch(const BatchBudget& budget) const {
  CONVEYOR_CHECK(budget.max_num_seqs > 0 && budget.max_num_batched_tokens > 0, "internal: a step budget of ",
                 budget.max_num_seqs, " sequences and ", budget.max_num_batched_tokens, " tokens");
  StageOptions o = *this;
  o.max_num_seqs = budget.max_num_seqs;
  o.max_num_batched_tokens = budget.max_num_batched_tokens;
  return o;
}

ModelSpec StageOptions::quantized(const ModelSpec& spec) const {
  ModelSpec s = spec;
  apply_quantization_flag(s.quant, quantization);
  return s;
}

}  // namespace conveyor
