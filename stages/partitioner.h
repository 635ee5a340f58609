// Layer partition across pipeline stages. A roofline cost model gives each layer its time for the
// configured batch and context (FLOPs and bytes against the device ceilings, per TP rank); the first
// stage adds the embedding, the last the final norm, LM head and sampling. A min-max contiguous split
// (dynamic programming) picks layers per stage, unless the user gave `parallel.partition`. The plan
// also says each rank's weight bytes, KV capacity and the predicted bubble. predict_layout() adds the
// links (TP all-reduce, pipeline p2p) and prefill to that plan to rank pp x tp layouts for a workload.
// With `DeviceCeilings::measured` (from `conveyor doctor`) each kernel class runs at its measured speed
// instead of the roofline (docs/bench.md, "The prediction model").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/device_profile.h"
#include "stages/gpu_peaks.h"

namespace conveyor {

struct DeviceCeilings {
  std::string label = kH200Peaks.label;        // the GPU these are of ("H200"; a CPU doctor's "CPU")
  double flops = kH200Peaks.flops;             // bf16 dense
  double bandwidth = kH200Peaks.bandwidth;     // bytes/s
  double memory = kH200Peaks.memory;           // bytes per GPU
  double memory_utilization = 0.9;
  DeviceProfile measured;         // doctor's component speeds; empty: every kernel at the ceilings above
};

// Micro-batches in flight in a pipeline of `pipeline` stages: the configured count (parallel.micro_batches),
// or one per stage when it is 0. The one place this default is written.
inline int micro_batches_for(int configured, int pipeline) { return configured > 0 ? configured : pipeline; }

// The batch the layer split is planned with when scheduler.max_num_seqs is auto (0): a run chooses its
// batch from the KV room its split leaves (runtime/engine/batch_budget.h), so the split takes a fixed one
// (the former default) and `conveyor plan` costs the chosen batch on that same split.
constexpr int64_t kAutoPlanningBatch = 256;

struct Workload {
  int64_t batch = 256;        // sequences decoding together (max_num_seqs)
  int64_t context = 2048;     // mean tokens in each sequence's KV cache
  int pipeline = 1;
  int tensor = 1;
  int micro_batches = 0;      // 0: = pipeline
  int dtype_bytes = 2;        // activations, embeddings and the LM head
  int weight_dtype_bytes = 2; // a layer linear's weight element: 1 with FP8 linears (--quantization fp8)
  int kv_dtype_bytes = 2;     // a cached K or V element: 1 with --kv-cache-dtype fp8 (StageOptions::kv_elem_bytes)
  // The step's token budget (max_num_batched_tokens; 0: the auto rule's, max(8192, batch)): a GPU rank's
  // activation pool is sized for it (gpu_reserve.h), and what it takes is not KV room.
  int64_t max_tokens = 0;
};

// Link costs for the layout prediction: `conveyor doctor --output-json` measures them; the defaults are
// NVLink on H200 (NCCL all-reduce bus bandwidth and p2p) as measured by nccl-tests-style runs.
struct LinkCosts {
  double allreduce_busbw = 300e9;     // bytes/s, busbw = algbw * 2(n-1)/n
  double allreduce_latency = 10e-6;   // s per collective
  double p2p_bandwidth = 360e9;       // bytes/s, one pipeline edge
  double p2p_latency = 11e-6;         // s per message
};

struct StageCost {
  int first_layer = 0, last_layer = 0;  // [first, last)
  double time_s = 0;           // predicted time of one micro-batch through this stage (decode step)
  double weight_bytes = 0;     // per TP rank
  double kv_bytes_per_token = 0;  // per TP rank, this stage's layers
  double kv_tokens = 0;        // capacity per TP rank from the memory left after weights (and, on GPUs,
                               // gpu_reserve_estimate: activations, logits, graphs, margin, context)
  double bubble = 0;           // predicted idle share in steady-state decode
};

struct PartitionPlan {
  std::vector<StageCost> stages;
  double step_time_s = 0;      // one decode step of all micro-batches
  bool fits = true;
  std::string why_not;         // set when a stage's weights do not fit
};

// Weights of one decoder layer (attention, MLP, its two norms), in parameters.
double layer_params(const ModelSpec& spec);
// K and V bytes one token takes in one layer on one of `tensor` TP ranks (kv_bytes_per_token of kv_cache.h).
double kv_layer_token_bytes(const ModelSpec& spec, int tensor, int kv_dtype_bytes);
// "fp8_e4m3 (--kv-cache-dtype fp8)", "bf16/fp16" or "fp32" for a KV element of that many bytes.
std::string kv_dtype_text(int kv_dtype_bytes);

// Predicted decode time of one layer for `tokens` sequences at `context` (one TP rank).
double layer_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);
double head_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);
double embed_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double tokens);

// What GemmRunner's timing of a shape's first use costs (kernels/gemm_tuning.h): kGemmTuningRuns runs
// of one layer's four GEMMs at `rows` (a stage's layers share the shapes), or of the LM head's; 0 on
// CPUs (device.padded_rows false: the CPU backend times nothing).
double layer_gemm_tuning_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double rows);
double head_gemm_tuning_time(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, double rows);

// One plan's work on a stage, for the schedule simulator (stages/sim/): its decodes (count and mean
// context), its prefill chunks (new tokens and the (query, visible key) pairs they attend) and the rows
// that reach the LM head.
struct StepWork {
  double decodes = 0;
  double decode_context = 0;
  double prefill_tokens = 0;
  double prefill_pairs = 0;
  double logits = 0;
};
struct StepTimes {
  double layer = 0;  // one decoder layer (one TP rank)
  double embed = 0;  // the first stage's lookup
  double head = 0;   // the last stage's norm, LM head and sampling
};
// The cost model above applied to one plan: a pure-decode plan is exactly layer_time/embed_time/
// head_time at its mean context; a plan with prefill chunks runs all its rows unpadded (eager).
StepTimes step_times(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev, const StepWork& work);

// Min-max contiguous split of layer costs into `stages` parts with extra cost on the first and last.
std::vector<int> min_max_split(const std::vector<double>& layer_cost, int stages, double first_extra,
                               double last_extra);

// Checks a user partition: one entry per stage, each >= 1, summing to the layer count.
void check_partition(const std::vector<int64_t>& partition, int pipeline, int64_t layers);

PartitionPlan plan_partition(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev,
                             const std::vector<int64_t>& partition_override);

// KV tokens every stage of `plan` holds per rank, in whole blocks of block_size (the smallest stage's).
int64_t plan_kv_tokens(const PartitionPlan& plan, int block_size);

std::string format_plan(const ModelSpec& spec, const Workload& w, const PartitionPlan& plan);

// A layout's predicted throughput for `batch` sequences of input_len prompt + output_len generated
// tokens, all in one wave: prefill (compute-bound, spread over all GPUs) then output_len decode steps
// at the mean context input_len + output_len / 2. Each decode step is the partition plan's step with
// the links added per micro-batch and stage: 2 TP all-reduces per layer (tokens * hidden * dtype bytes
// each), the embedding's all-reduce and the LM head's logit all-gather, one p2p send per stage edge.
struct LayoutPrediction {
  int pipeline = 1, tensor = 1, micro_batches = 1;
  int64_t batch = 0;                  // sequences decoding together (the workload's, or chosen from memory)
  std::vector<int> partition;         // layers per stage
  double step_time_s = 0;             // one decode step of the whole batch
  double prefill_time_s = 0;
  double decode_tokens_per_s = 0;     // batch / step_time
  double output_tokens_per_s = 0;     // batch * output_len / (prefill + output_len * step)
  double per_gpu_tokens_per_s = 0;    // output_tokens_per_s / (pipeline * tensor)
  double bubble = 0;                  // predicted idle share of the busiest-bubble stage
  // The busiest stage's decode time per micro-batch, by part (memory parts at full bandwidth).
  // With measured speeds: weights_s = the GEMMs, kv_s = decode attention, overhead_s = the small kernels
  // and the host's step overhead; compute_s stays the FLOPs at the peak (it decides memory- vs compute-bound).
  double compute_s = 0, weights_s = 0, kv_s = 0, allreduce_s = 0, p2p_s = 0, overhead_s = 0;
  std::string bottleneck;  // "weights", "KV", "compute", "overhead", "all-reduce" or "p2p" (+ ", bubble N%")
  bool fits = true;
  std::string why_not;
};

struct CompareWorkload {
  int64_t batch = 64;  // 0: per layout, what choose_batch makes of its KV room (scheduler.max_num_seqs auto)
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  int micro_batches = 0;  // 0: = pipeline
};

// Whether the model's heads, KV heads and MLP split over `tensor` ranks (as weights_layout requires).
bool tensor_parallel_fits(const ModelSpec& spec, int tensor);

LayoutPrediction predict_layout(const ModelSpec& spec, const CompareWorkload& cw, int pipeline, int tensor,
                                const DeviceCeilings& dev, const LinkCosts& links);

// Every pp x tp = gpus layout whose tensor size fits the model and whose pipeline has layers for each
// stage, best predicted output tokens/s first (layouts that do not fit last).
std::vector<LayoutPrediction> compare_layouts(const ModelSpec& spec, const CompareWorkload& cw, int gpus,
                                              const DeviceCeilings& dev, const LinkCosts& links);

std::string format_comparison(const ModelSpec& spec, const CompareWorkload& cw, int gpus,
                              const std::vector<LayoutPrediction>& ranked);

}  // namespace conveyor
