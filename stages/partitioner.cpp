// Cost model and min-max split (see partitioner.h). Decode is the steady state of a long batch job, so
// costs are per decode step: each micro-batch carries batch / micro_batches sequences.
#include "stages/partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "kernels/gemm_tuning.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/engine/batch_budget.h"
#include "runtime/model/weights_layout.h"
#include "stages/decode_buckets.h"
#include "stages/gpu_reserve.h"
#include "stages/kv_cache.h"
#include "stages/stage_options.h"

namespace conveyor {

double layer_params(const ModelSpec& s) {
  double attn = static_cast<double>(s.hidden) * (s.q_size() + 2 * s.kv_size()) + s.q_size() * s.hidden;
  double mlp = 3.0 * s.hidden * s.intermediate;
  return attn + mlp + 2.0 * s.hidden;
}

double kv_layer_token_bytes(const ModelSpec& s, int tensor, int kv_dtype_bytes) {
  return static_cast<double>(kv_bytes_per_token(1, static_cast<int>(kv_heads_per_rank(s, tensor)),
                                                static_cast<int>(s.head_dim), static_cast<size_t>(kv_dtype_bytes)));
}

namespace {

double roofline(double flops, double bytes, const DeviceCeilings& dev) {
  return std::max(flops / dev.flops, bytes / dev.bandwidth);
}

// fp32 logits: written once, then about eight passes by sampling (softmax, penalties, top-k/top-p
// selection, the draw). An assumption until `conveyor bench` measures it.
const double kSamplingPasses = 9.0;

// --- measured device model (DeviceCeilings::measured non-empty) ------------------------------------

// The projections of one decoder layer: the fused q|k|v (stages/attention.cpp), o accumulating into
// the residual, the fused gate/up and down accumulating (stages/mlp.cpp). Each is one GemmRunner call.
const int kGemmsPerLayer = 4;
// The other kernels of one decode layer besides the GEMMs and paged attention (whose split-K reduce the
// doctor's attention measurement includes): two rms_norm (stages/decoder_layer.cpp), rope fused with the
// q|k|v split and the KV write (CudaOps::qkv_attention), silu_mul (stages/mlp.cpp).
const int kSmallKernelsPerLayer = 4;
// The last stage's final rms_norm and logit-row gather before the LM head GEMM; the first stage's lookup.
const int kHeadSmallKernels = 2;
const int kEmbedSmallKernels = 1;

// Rows a decode step's kernels run at: stages/decode_buckets.h pads n sequences to its next bucket (1, 2,
// 4, ... 256) so one captured graph serves them; above the last bucket the step runs eagerly, unpadded.
// A device without graphs (the CPU backend) runs the rows there are.
double decode_rows(const DeviceCeilings& dev, double tokens) {
  if (!dev.measured.padded_rows) return tokens;
  const int n = static_cast<int>(std::ceil(tokens));
  const int bucket = decode_bucket_for(n);
  return bucket > 0 ? bucket : n;
}

struct DecodeParts {
  double gemm = 0;       // projections (and the LM head) at the measured GEMM speed
  double attention = 0;  // paged decode attention: KV read
  double small = 0;      // small kernels: fixed cost each + their activation bytes at the peak bandwidth
  double total() const { return gemm + attention + small; }
};

// ab: the weights' (and, for FP8, the quantized x's) bytes per element; one byte takes doctor's FP8 linears
// where measured.
double gemm_s(const DeviceCeilings& dev, double m, double n, double k, double ab, double out) {
  const DeviceProfile& p = dev.measured;
  if (ab == 1 && !p.gemm_decode_fp8.empty())
    return p.gemm_time(m, n, k, ab, out, p.gemm_prefill_fp8_flops > 0 ? p.gemm_prefill_fp8_flops : dev.flops, true);
  const double peak = p.gemm_prefill_flops > 0 ? p.gemm_prefill_flops : dev.flops;
  if (!p.gemm_decode.empty()) return p.gemm_time(m, n, k, ab, out, peak);
  return std::max(2.0 * m * n * k / peak, ((n * k + m * k) * ab + m * n * out) / dev.bandwidth);
}

double small_kernels_s(const DeviceCeilings& dev, int kernels, double bytes) {
  const LinearCost& ops = dev.measured.small_ops;
  if (ops.measured()) return kernels * ops.fixed_s + bytes / ops.bandwidth;
  return kernels * dev.measured.graph_kernel_s + bytes / dev.bandwidth;
}

// Sampling `rows` rows: the measured sampler over the full vocabulary (it runs on the last stage's tp 0
// after the logits are gathered), else the fp32 logits' passes at the peak bandwidth.
double sampling_s(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double rows) {
  if (dev.measured.sampling.measured()) return rows * dev.measured.sampling.time(4.0 * s.vocab);
  return (kSamplingPasses - 1.0) * rows * static_cast<double>(s.vocab) / w.tensor * 4.0 / dev.bandwidth;
}

// One layer's parts at `m` GEMM rows reading `kv_bytes` of KV in decode attention.
DecodeParts layer_parts(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double m, double kv_bytes) {
  const double ab = w.dtype_bytes, wb = w.weight_dtype_bytes, tp = w.tensor;
  const double hidden = s.hidden, q = static_cast<double>(s.q_size()) / tp;
  const double kv = kv_heads_per_rank(s, w.tensor) * s.head_dim, inter = s.intermediate / tp;
  DecodeParts p;
  p.gemm = gemm_s(dev, m, q + 2.0 * kv, hidden, wb, ab) + gemm_s(dev, m, hidden, q, wb, ab) +
           gemm_s(dev, m, 2.0 * inter, hidden, wb, ab) + gemm_s(dev, m, hidden, inter, wb, ab);
  static_assert(kGemmsPerLayer == 4, "the sum above names each projection");
  // An FP8 cache takes doctor's FP8 line where it measured one (its kernel does not run at the bf16 line's
  // speed per byte), else the bf16 line over the halved bytes.
  const bool fp8 = w.kv_dtype_bytes == 1 && dev.measured.attention_decode_fp8.measured();
  const LinearCost& att = fp8 ? dev.measured.attention_decode_fp8 : dev.measured.attention_decode;
  p.attention = att.measured() ? att.time(kv_bytes) : kv_bytes / dev.bandwidth;
  // Bytes read + written: two rms_norm 2 rows of hidden each, rope reads q|k|v and writes q, k and v
  // (cache), SiLU-mul 2 in + 1 out of the MLP width; the residual adds ride the GEMMs (their y read).
  const double small_bytes = m * ab * (4 * hidden + 2 * (q + 2 * kv) + 3 * inter + 2 * hidden);
  p.small = small_kernels_s(dev, kSmallKernelsPerLayer, small_bytes);
  return p;
}

double decode_kv_bytes(const ModelSpec& s, const Workload& w, double tokens) {
  return tokens * w.context * kv_layer_token_bytes(s, w.tensor, w.kv_dtype_bytes);
}

DecodeParts measured_layer(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  return layer_parts(s, w, dev, decode_rows(dev, tokens), decode_kv_bytes(s, w, tokens));  // padded rows read nothing
}

DecodeParts measured_head(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  const double m = decode_rows(dev, tokens), vocab = static_cast<double>(s.vocab) / w.tensor;
  DecodeParts p;
  p.gemm = gemm_s(dev, m, vocab, s.hidden, w.dtype_bytes, 4.0);  // writes the fp32 logits once
  p.small = small_kernels_s(dev, kHeadSmallKernels, 4.0 * m * s.hidden * w.dtype_bytes) + sampling_s(s, w, dev, m);
  return p;
}

DecodeParts measured_embed(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  DecodeParts p;
  p.small = small_kernels_s(dev, kEmbedSmallKernels, decode_rows(dev, tokens) * s.hidden * w.dtype_bytes * 2.0);
  return p;
}

}  // namespace

double layer_gemm_tuning_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double rows) {
  if (!dev.measured.padded_rows) return 0.0;
  return kGemmTuningRuns * layer_parts(s, w, dev, rows, 0.0).gemm;
}

double head_gemm_tuning_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double rows) {
  if (!dev.measured.padded_rows) return 0.0;
  return kGemmTuningRuns * gemm_s(dev, rows, static_cast<double>(s.vocab) / w.tensor, s.hidden, w.dtype_bytes, 4.0);
}

double layer_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  if (dev.measured.any()) return measured_layer(s, w, dev, tokens).total();
  double params = layer_params(s) / w.tensor;
  double attn_flops = 4.0 * tokens * w.context * s.heads * s.head_dim / w.tensor;
  double flops = 2.0 * tokens * params + attn_flops;
  double kv_read = tokens * w.context * kv_layer_token_bytes(s, w.tensor, w.kv_dtype_bytes);
  double bytes = params * w.weight_dtype_bytes + kv_read;
  return roofline(flops, bytes, dev);
}

double head_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  if (dev.measured.any()) return measured_head(s, w, dev, tokens).total();
  double params = static_cast<double>(s.vocab) * s.hidden / w.tensor;
  double bytes = params * w.dtype_bytes + kSamplingPasses * tokens * s.vocab / w.tensor * 4.0;
  return roofline(2.0 * tokens * params, bytes, dev);
}

double embed_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  if (dev.measured.any()) return measured_embed(s, w, dev, tokens).total();
  return roofline(0, tokens * s.hidden * w.dtype_bytes * 2.0, dev);
}

StepTimes step_times(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, const StepWork& work) {
  Workload wd = w;
  wd.context = static_cast<int64_t>(std::llround(work.decode_context));
  StepTimes t;
  t.head = work.logits > 0 ? head_time(s, wd, dev, work.logits) : 0.0;
  if (work.prefill_tokens <= 0) {
    t.layer = layer_time(s, wd, dev, work.decodes);
    t.embed = embed_time(s, wd, dev, work.decodes);
    return t;
  }
  // A step with prefill chunks runs eagerly: every row unpadded through the GEMMs (compute-bound at
  // chunk sizes), decode attention over the decodes' KV, causal attention over the chunks' pairs.
  const double rows = work.decodes + work.prefill_tokens;
  const double kv_read = decode_kv_bytes(s, wd, work.decodes);
  const double attn_flops = 4.0 * s.heads / w.tensor * s.head_dim * work.prefill_pairs;
  const DeviceProfile& m = dev.measured;
  if (m.any()) {
    const DecodeParts p = layer_parts(s, wd, dev, rows, kv_read);
    t.layer = p.total() + attn_flops / (m.attention_prefill_flops > 0 ? m.attention_prefill_flops : dev.flops);
    t.embed = measured_embed(s, wd, dev, rows).total();
  } else {
    const double params = layer_params(s) / w.tensor;
    t.layer = roofline(2.0 * rows * params + attn_flops, params * w.weight_dtype_bytes + kv_read, dev);
    t.embed = roofline(0, rows * s.hidden * w.dtype_bytes * 2.0, dev);
  }
  return t;
}

std::vector<int> min_max_split(const std::vector<double>& cost, int stages, double first_extra, double last_extra) {
  const int n = static_cast<int>(cost.size());
  CONVEYOR_CHECK(stages >= 1 && stages <= n, "cannot split ", n, " layers into ", stages,
                 " pipeline stages: every stage needs at least one layer");
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: minimal max stage cost splitting layers [0, i) into s + 1 stages; cut[s][i] its last cut.
  std::vector<std::vector<double>> best(stages, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages, std::vector<int>(n + 1, 0));
  for (int i = 1; i <= n; ++i) best[0][i] = prefix[i] + first_extra + (stages == 1 ? last_extra : 0.0);
  for (int s = 1; s < stages; ++s) {
    double extra = s == stages - 1 ? last_extra : 0.0;
    for (int i = s + 1; i <= n; ++i) {
      for (int j = s; j < i; ++j) {
        double v = std::max(best[s - 1][j], prefix[i] - prefix[j] + extra);
        // Ties go to the later cut, so earlier stages take more layers and the last stage fewer.
        if (v <= best[s][i]) {
          best[s][i] = v;
          cut[s][i] = j;
        }
      }
    }
  }
  std::vector<int> counts(stages);
  int end = n;
  for (int s = stages - 1; s >= 1; --s) {
    int j = cut[s][end];
    counts[s] = end - j;
    end = j;
  }
  counts[0] = end;
  return counts;
}

void check_partition(const std::vector<int64_t>& partition, int pipeline, int64_t layers) {
  CONVEYOR_CHECK(static_cast<int>(partition.size()) == pipeline, "parallel.partition has ", partition.size(),
                 " entries but the pipeline has ", pipeline, " stages");
  int64_t sum = 0;
  for (size_t s = 0; s < partition.size(); ++s) {
    CONVEYOR_CHECK(partition[s] >= 1, "parallel.partition gives stage ", s, " ", partition[s],
                   " layers; every stage needs at least one");
    sum += partition[s];
  }
  CONVEYOR_CHECK(sum == layers, "parallel.partition sums to ", sum, " layers but the model has ", layers,
                 " (", join([&] {
                   std::vector<std::string> v;
                   for (auto p : partition) v.push_back(std::to_string(p));
                   return v;
                 }(), " + "), ")");
}

PartitionPlan plan_partition(const ModelSpec& spec, const Workload& w, const DeviceCeilings& dev,
                             const std::vector<int64_t>& partition_override) {
  const int P = w.pipeline;
  const int M = micro_batches_for(w.micro_batches, P);
  const double tokens = static_cast<double>(w.batch) / M;  // sequences per micro-batch
  std::vector<double> cost(spec.layers, layer_time(spec, w, dev, tokens));
  double first = embed_time(spec, w, dev, tokens), last = head_time(spec, w, dev, tokens);

  std::vector<int> counts;
  if (partition_override.empty()) {
    counts = min_max_split(cost, P, first, last);
  } else {
    check_partition(partition_override, P, spec.layers);
    for (auto c : partition_override) counts.push_back(static_cast<int>(c));
  }

  PartitionPlan plan;
  double layer_w = layer_params(spec) / w.tensor * w.weight_dtype_bytes;
  double head_w = static_cast<double>(spec.vocab) * spec.hidden / w.tensor * w.dtype_bytes;
  double kv_per_layer_token = kv_layer_token_bytes(spec, w.tensor, w.kv_dtype_bytes);
  int layer = 0;
  double t_max = 0, t_sum = 0;
  for (int s = 0; s < P; ++s) {
    StageCost c;
    c.first_layer = layer;
    c.last_layer = layer + counts[s];
    layer = c.last_layer;
    // Each stage's host prepares and launches every micro-batch's step (the leader also schedules).
    c.time_s = counts[s] * cost[0] + (s == 0 ? first : 0.0) + (s == P - 1 ? last : 0.0) + dev.measured.step_overhead_s;
    c.weight_bytes = counts[s] * layer_w + (s == 0 ? head_w : 0.0) +
                     (s == P - 1 && (!spec.tie_word_embeddings || P > 1) ? head_w : 0.0);
    c.kv_bytes_per_token = counts[s] * kv_per_layer_token;
    double reserve = 0;
    if (dev.measured.dtype_bytes != 4) {  // a GPU rank (a CPU doctor says fp32): what its run reserves
      const int64_t step_tokens = w.max_tokens > 0 ? w.max_tokens : std::max<int64_t>(gpu_batch_rule().token_budget, w.batch);
      reserve = gpu_reserve_estimate(spec, w.tensor, s == P - 1, step_tokens, w.batch, static_cast<size_t>(w.dtype_bytes),
                                     /*graphs=*/true);
    }
    const double free_bytes = dev.memory * dev.memory_utilization - c.weight_bytes - reserve;
    c.kv_tokens = free_bytes > 0 ? free_bytes / c.kv_bytes_per_token : 0;
    if (free_bytes <= 0 && plan.fits) {
      plan.fits = false;
      plan.why_not = "stage " + std::to_string(s) + " needs " + format_bytes(c.weight_bytes) + " of weights per rank" +
                     (reserve > 0 ? " (and ~" + format_bytes(reserve) + " for activations, logits and workspaces)" : "") +
                     " but only " + format_bytes(dev.memory * dev.memory_utilization) + " may be used";
    }
    t_max = std::max(t_max, c.time_s);
    t_sum += c.time_s;
    plan.stages.push_back(c);
  }
  // Steady state: the slowest stage processes M micro-batches per step, unless one micro-batch's trip
  // through all stages (and back to the leader) is longer than that.
  plan.step_time_s = std::max(M * t_max, t_sum);
  for (auto& c : plan.stages) c.bubble = 1.0 - M * c.time_s / plan.step_time_s;
  return plan;
}

std::string kv_dtype_text(int kv_dtype_bytes) {
  return kv_dtype_bytes == 1 ? "fp8_e4m3 (--kv-cache-dtype fp8)" : kv_dtype_bytes == 2 ? "bf16/fp16" : "fp32";
}

std::string format_plan(const ModelSpec& spec, const Workload& w, const PartitionPlan& plan) {
  std::ostringstream os;
  const int M = micro_batches_for(w.micro_batches, w.pipeline);
  os << "model: " << architecture_name(spec.architecture) << ", " << spec.layers << " layers, hidden " << spec.hidden
     << ", vocab " << spec.vocab << "\nlayout: pipeline " << w.pipeline << " x tensor " << w.tensor << ", "
     << M << " micro-batches of " << w.batch / M << " sequences, context " << w.context << "\nKV cache: "
     << kv_dtype_text(w.kv_dtype_bytes) << ", " << format_bytes(kv_layer_token_bytes(spec, w.tensor, w.kv_dtype_bytes))
     << " per token and layer per rank\n\n";
  os << " stage  layers       count  time share  weights/rank     KV tokens/rank  bubble\n";
  double total = 0;
  for (const auto& c : plan.stages) total += c.time_s;
  char line[256];
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& c = plan.stages[s];
    std::snprintf(line, sizeof(line), " %5zu  [%3d, %3d)  %5d  %9.1f%%  %-15s %14.0f  %5.1f%%\n", s, c.first_layer,
                  c.last_layer, c.last_layer - c.first_layer, 100.0 * c.time_s / total,
                  format_bytes(c.weight_bytes).c_str(), c.kv_tokens, 100.0 * c.bubble);
    os << line;
  }
  std::snprintf(line, sizeof(line), "\npredicted decode step: %.2f ms (%.0f output tokens/s per replica)\n",
                plan.step_time_s * 1e3, w.batch / plan.step_time_s);
  os << line;
  if (!plan.fits) os << "DOES NOT FIT: " << plan.why_not << "\n";
  return os.str();
}


// --- layout comparison (conveyor plan --compare) ----------------------------------------------------

bool tensor_parallel_fits(const ModelSpec& s, int tp) {
  return tp >= 1 && s.heads % tp == 0 && (s.kv_heads % tp == 0 || tp % s.kv_heads == 0) && s.intermediate % tp == 0;
}

namespace {

// The per-micro-batch link costs of one layout.
struct LinkTimes {
  double allreduce = 0;  // one all-reduce of a micro-batch's hidden states over the TP group
  double gather = 0;     // the LM head's all-gather of fp32 logits
  double p2p = 0;        // one hidden-state send to the next stage
};

LinkTimes link_times(const ModelSpec& s, const Workload& w, const LinkCosts& links, double tokens) {
  LinkTimes t;
  const double act_bytes = tokens * s.hidden * w.dtype_bytes;
  const double n = w.tensor;
  if (w.tensor > 1) {
    // nccl-tests' bus bandwidth: all-reduce moves 2(n-1)/n of the buffer per rank, all-gather (n-1)/n.
    t.allreduce = links.allreduce_latency + act_bytes * 2.0 * (n - 1) / n / links.allreduce_busbw;
    t.gather = links.allreduce_latency + tokens * s.vocab * 4.0 * (n - 1) / n / links.allreduce_busbw;
  }
  if (w.pipeline > 1) t.p2p = links.p2p_latency + act_bytes / links.p2p_bandwidth;
  return t;
}

// Prefill of the whole batch: compute-bound over all GPUs (chunks keep every stage busy), plus the TP
// all-reduce bytes of every prompt token (stages run theirs concurrently) and one pass over each edge.
// Measured: the projections at doctor's prefill GEMM FLOP/s, attention at its prefill attention FLOP/s,
// and the small kernels' activation bytes (what a decode layer moves per row) at the peak bandwidth.
double prefill_time(const ModelSpec& s, const CompareWorkload& cw, const Workload& w, const DeviceCeilings& dev,
                    const LinkCosts& links) {
  const double tokens = static_cast<double>(cw.batch) * cw.input_len;
  const double attn = 2.0 * s.heads * s.head_dim * static_cast<double>(cw.input_len) * cw.input_len * cw.batch;
  const double gemm_flops = 2.0 * tokens * layer_params(s) * s.layers + 2.0 * cw.batch * static_cast<double>(s.vocab) * s.hidden;
  const double gpus = static_cast<double>(w.pipeline) * w.tensor;
  const DeviceProfile& m = dev.measured;
  double t = gemm_flops / (gpus * (m.gemm_prefill_flops > 0 ? m.gemm_prefill_flops : dev.flops)) +
             attn * s.layers / (gpus * (m.attention_prefill_flops > 0 ? m.attention_prefill_flops : dev.flops));
  if (m.any()) {
    DeviceCeilings bytes_only = dev;  // one row's small-kernel bytes, without the per-kernel fixed cost
    bytes_only.measured.graph_kernel_s = 0;
    t += tokens * s.layers * measured_layer(s, w, bytes_only, 1.0).small / gpus;
  }
  const double act_bytes = tokens * s.hidden * w.dtype_bytes;
  if (w.tensor > 1)
    t += 2.0 * s.layers * act_bytes * 2.0 * (w.tensor - 1) / w.tensor / links.allreduce_busbw / w.pipeline;
  if (w.pipeline > 1) t += act_bytes / links.p2p_bandwidth;
  return t;
}

std::string bottleneck_of(const LayoutPrediction& p, bool memory_bound) {
  std::string name = memory_bound ? (p.weights_s >= p.kv_s ? "weights" : "KV") : "compute";
  double worst = memory_bound ? p.weights_s + p.kv_s : p.compute_s;
  if (p.overhead_s > worst) {
    name = "overhead";
    worst = p.overhead_s;
  }
  if (p.allreduce_s > worst) {
    name = "all-reduce";
    worst = p.allreduce_s;
  }
  if (p.p2p_s > worst) name = "p2p";
  if (p.bubble > 0.05) name += ", bubble " + std::to_string(static_cast<int>(std::lround(100 * p.bubble))) + "%";
  return name;
}

}  // namespace

int64_t plan_kv_tokens(const PartitionPlan& plan, int block_size) {
  double tokens = plan.stages.empty() ? 0.0 : std::numeric_limits<double>::max();
  for (const StageCost& c : plan.stages) tokens = std::min(tokens, c.kv_tokens);
  const auto blocks = static_cast<int64_t>(std::floor(tokens / block_size));
  return blocks * block_size;
}

namespace {

// The plan of a compare workload: with an auto batch, split at kAutoPlanningBatch as the run does, then
// cost the batch the run would choose on that split's KV room (sequences of input + output tokens, the
// GPU rule within the decode graphs' reach, as a run with CUDA graphs takes it).
PartitionPlan compare_plan(const ModelSpec& s, const CompareWorkload& cw, const DeviceCeilings& dev, Workload* w) {
  w->batch = cw.batch > 0 ? cw.batch : kAutoPlanningBatch;
  PartitionPlan plan = plan_partition(s, *w, dev, {});  // the split the runtime uses
  if (cw.batch > 0) return plan;
  BudgetRequest r;
  r.seq_len = cw.input_len + cw.output_len;
  r.rule = gpu_batch_rule_for(/*cuda_graphs=*/true, micro_batches_for(cw.micro_batches, w->pipeline));
  w->batch = choose_batch(r, plan_kv_tokens(plan, r.block_size)).budget.max_num_seqs;
  std::vector<int64_t> counts;
  for (const StageCost& c : plan.stages) counts.push_back(c.last_layer - c.first_layer);
  return plan_partition(s, *w, dev, counts);
}

}  // namespace

LayoutPrediction predict_layout(const ModelSpec& s, const CompareWorkload& cw_in, int pipeline, int tensor,
                                const DeviceCeilings& dev, const LinkCosts& links) {
  CompareWorkload cw = cw_in;
  Workload w;
  w.context = std::max<int64_t>(1, cw.input_len + cw.output_len / 2);
  w.pipeline = pipeline;
  w.tensor = tensor;
  w.micro_batches = cw.micro_batches;
  LayoutPrediction p;
  p.pipeline = pipeline;
  p.tensor = tensor;
  p.micro_batches = micro_batches_for(cw.micro_batches, pipeline);
  const PartitionPlan plan = compare_plan(s, cw_in, dev, &w);
  cw.batch = w.batch;
  p.batch = w.batch;
  p.fits = plan.fits;
  p.why_not = plan.why_not;
  const double kv_need = static_cast<double>(cw.batch) * (cw.input_len + cw.output_len);
  for (size_t i = 0; i < plan.stages.size() && p.fits; ++i) {
    if (plan.stages[i].kv_tokens >= kv_need) continue;
    p.fits = false;
    p.why_not = "stage " + std::to_string(i) + " holds KV for " + std::to_string(std::llround(plan.stages[i].kv_tokens)) +
                " tokens per rank but the batch needs " + std::to_string(std::llround(kv_need));
  }

  const double tokens = static_cast<double>(cw.batch) / p.micro_batches;
  const LinkTimes lt = link_times(s, w, links, tokens);
  std::vector<double> t(plan.stages.size());
  size_t busiest = 0;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const StageCost& c = plan.stages[i];
    p.partition.push_back(c.last_layer - c.first_layer);
    const bool last = i + 1 == plan.stages.size();
    t[i] = c.time_s + 2.0 * p.partition.back() * lt.allreduce + (i == 0 ? lt.allreduce : 0.0) +
           (last ? lt.gather : 0.0) + (last ? (pipeline > 1 ? links.p2p_latency : 0.0) : lt.p2p);
    if (t[i] > t[busiest]) busiest = i;
  }
  double t_sum = 0;
  for (double x : t) t_sum += x;
  p.step_time_s = std::max(p.micro_batches * t[busiest], t_sum);
  for (double x : t) p.bubble = std::max(p.bubble, 1.0 - p.micro_batches * x / p.step_time_s);

  // The busiest stage by part: its layers, plus the LM head on the last stage.
  const double n = p.partition[busiest];
  const double params = layer_params(s) / tensor;
  const double ctx = static_cast<double>(w.context);
  const bool last = busiest + 1 == plan.stages.size();
  const double head = static_cast<double>(s.vocab) * s.hidden / tensor;
  p.compute_s = n * (2.0 * tokens * params + 4.0 * tokens * ctx * s.heads * s.head_dim / tensor) / dev.flops +
                (last ? 2.0 * tokens * head / dev.flops : 0.0);
  if (dev.measured.any()) {
    const DecodeParts layer = measured_layer(s, w, dev, tokens);
    const DecodeParts hd = last ? measured_head(s, w, dev, tokens) : DecodeParts{};
    const DecodeParts emb = busiest == 0 ? measured_embed(s, w, dev, tokens) : DecodeParts{};
    p.weights_s = n * layer.gemm + hd.gemm;
    p.kv_s = n * layer.attention;
    p.overhead_s = n * layer.small + hd.small + emb.small + dev.measured.step_overhead_s;
  } else {
    p.weights_s = (n * params + (last ? head : 0.0)) * w.dtype_bytes / dev.bandwidth;
    p.kv_s = n * tokens * ctx * kv_layer_token_bytes(s, tensor, w.kv_dtype_bytes) / dev.bandwidth;
    p.overhead_s = dev.measured.step_overhead_s;
  }
  p.allreduce_s = 2.0 * n * lt.allreduce + (busiest == 0 ? lt.allreduce : 0.0) + (last ? lt.gather : 0.0);
  p.p2p_s = last ? 0.0 : lt.p2p;
  p.bottleneck = bottleneck_of(p, p.weights_s + p.kv_s >= p.compute_s);

  p.prefill_time_s = prefill_time(s, cw, w, dev, links);
  p.decode_tokens_per_s = cw.batch / p.step_time_s;
  p.output_tokens_per_s =
      static_cast<double>(cw.batch) * cw.output_len / (p.prefill_time_s + cw.output_len * p.step_time_s);
  p.per_gpu_tokens_per_s = p.output_tokens_per_s / (pipeline * tensor);
  return p;
}

std::vector<LayoutPrediction> compare_layouts(const ModelSpec& s, const CompareWorkload& cw, int gpus,
                                              const DeviceCeilings& dev, const LinkCosts& links) {
  CONVEYOR_CHECK(gpus >= 1, "--gpus must be >= 1, got ", gpus);
  CONVEYOR_CHECK(cw.batch >= 0 && cw.input_len >= 1 && cw.output_len >= 1,
                 "the workload needs --batch (0: from memory), --input-len and --output-len >= 1");
  std::vector<LayoutPrediction> out;
  for (int tp = 1; tp <= gpus; ++tp) {
    if (gpus % tp != 0 || !tensor_parallel_fits(s, tp) || gpus / tp > s.layers) continue;
    out.push_back(predict_layout(s, cw, gpus / tp, tp, dev, links));
  }
  CONVEYOR_CHECK(!out.empty(), "no pp x tp layout of ", gpus, " GPUs fits ", s.source, " (", s.heads, " heads, ",
                 s.kv_heads, " KV heads, ", s.layers, " layers); pick a GPU count whose divisors split the heads");
  std::stable_sort(out.begin(), out.end(), [](const LayoutPrediction& a, const LayoutPrediction& b) {
    if (a.fits != b.fits) return a.fits;
    return a.output_tokens_per_s > b.output_tokens_per_s;
  });
  return out;
}

std::string format_comparison(const ModelSpec& s, const CompareWorkload& cw, int gpus,
                              const std::vector<LayoutPrediction>& ranked) {
  std::ostringstream os;
  os << "model: " << architecture_name(s.architecture) << ", " << s.layers << " layers, hidden " << s.hidden
     << "\nworkload: batch "
     << (cw.batch > 0 ? std::to_string(cw.batch) : "from memory (each layout's KV room, sequences of input + output)")
     << ", " << cw.input_len << " in / " << cw.output_len << " out, " << gpus << " GPUs\n\n";
  os << " rank  layout       M  batch  partition      step ms  prefill s  output tok/s  per GPU  bubble  bottleneck\n";
  char line[320];
  for (size_t i = 0; i < ranked.size(); ++i) {
    const LayoutPrediction& p = ranked[i];
    std::vector<std::string> parts;
    for (int c : p.partition) parts.push_back(std::to_string(c));
    const std::string layout = "pp=" + std::to_string(p.pipeline) + " tp=" + std::to_string(p.tensor);
    std::snprintf(line, sizeof(line), " %4zu  %-11s %2d  %5lld  %-13s %8.2f  %9.2f  %12.0f  %7.0f  %5.1f%%  %s\n",
                  i + 1, layout.c_str(), p.micro_batches, static_cast<long long>(p.batch), join(parts, "+").c_str(), 1e3 * p.step_time_s, p.prefill_time_s,
                  p.output_tokens_per_s, p.per_gpu_tokens_per_s, 100.0 * p.bubble,
                  p.fits ? p.bottleneck.c_str() : ("DOES NOT FIT: " + p.why_not).c_str());
    os << line;
  }
  return os.str();
}

}  // namespace conveyor
