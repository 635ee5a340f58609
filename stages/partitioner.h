// Layer partition across pipeline stages. A roofline cost model gives each layer its time for the
// configured batch and context (FLOPs and bytes against the device ceilings, per TP rank); the first
// stage adds the embedding, the last the final norm, LM head and sampling. A min-max contiguous split
// (dynamic programming) picks layers per stage, unless the user gave `parallel.partition`. The plan
// also says each rank's weight bytes, KV capacity and the predicted bubble.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model_spec.h"

namespace conveyor {

struct DeviceCeilings {
  double flops = 810e12;          // bf16 dense, measured on H200 (cuBLASLt)
  double bandwidth = 4.28e12;     // bytes/s, device copy on H200
  double memory = 140.0 * (1ull << 30);  // bytes per GPU
  double memory_utilization = 0.9;
};

struct Workload {
  int64_t batch = 256;        // sequences decoding together (max_num_seqs)
  int64_t context = 2048;     // mean tokens in each sequence's KV cache
  int pipeline = 1;
  int tensor = 1;
  int micro_batches = 0;      // 0: = pipeline
  int dtype_bytes = 2;        // weights and activations
  int kv_dtype_bytes = 2;
};

struct StageCost {
  int first_layer = 0, last_layer = 0;  // [first, last)
  double time_s = 0;           // predicted time of one micro-batch through this stage (decode step)
  double weight_bytes = 0;     // per TP rank
  double kv_bytes_per_token = 0;  // per TP rank, this stage's layers
  double kv_tokens = 0;        // capacity per TP rank from the memory left after weights
  double bubble = 0;           // predicted idle share in steady-state decode
};

struct PartitionPlan {
  std::vector<StageCost> stages;
  double step_time_s = 0;      // one decode step of all micro-batches
  bool fits = true;
  std::string why_not;         // set when a stage's weights do not fit
};

// Predicted decode time of one layer for `tokens` sequences at `context` (one TP rank).
double layer_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);
double head_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);
double embed_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);

// Min-max contiguous split of layer costs into `stages` parts with extra cost on the first and last.
std::vector<int> min_max_split(const std::vector<double>& layer_cost, int stages, double first_extra,
                               double last_extra);

// Checks a user partition: one entry per stage, each >= 1, summing to the layer count.
void check_partition(const std::vector<int64_t>& partition, int pipeline, int64_t layers);

PartitionPlan plan_partition(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev,
                             const std::vector<int64_t>& partition_override);

std::string format_plan(const ModelSpec& spec, const Workload& w, const PartitionPlan& plan);

}  // namespace conveyor
