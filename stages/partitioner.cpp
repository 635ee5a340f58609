// Cost model and min-max split (see partitioner.h). Decode is the steady state of a long batch job, so
// costs are per decode step: each micro-batch carries batch / micro_batches sequences.
#include "stages/partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "runtime/error.h"
#include "runtime/strings.h"

namespace conveyor {

namespace {

double layer_params(const ModelSpec& s) {
  double attn = static_cast<double>(s.hidden) * (s.q_size() + 2 * s.kv_size()) + s.q_size() * s.hidden;
  double mlp = 3.0 * s.hidden * s.intermediate;
  return attn + mlp + 2.0 * s.hidden;
}

double roofline(double flops, double bytes, const DeviceCeilings& dev) {
  return std::max(flops / dev.flops, bytes / dev.bandwidth);
}

// KV heads per TP rank (replicated when tp exceeds them).
double kv_heads_per_rank(const ModelSpec& s, int tp) {
  return std::max<double>(1.0, static_cast<double>(s.kv_heads) / tp);
}

}  // namespace

double layer_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  double params = layer_params(s) / w.tensor;
  double attn_flops = 4.0 * tokens * w.context * s.heads * s.head_dim / w.tensor;
  double flops = 2.0 * tokens * params + attn_flops;
  double kv_read = tokens * w.context * 2.0 * kv_heads_per_rank(s, w.tensor) * s.head_dim * w.kv_dtype_bytes;
  double bytes = params * w.dtype_bytes + kv_read;
  return roofline(flops, bytes, dev);
}

double head_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  double params = static_cast<double>(s.vocab) * s.hidden / w.tensor;
  // fp32 logits: written once, then about eight passes by sampling (softmax, penalties, top-k/top-p
  // selection, the draw). An assumption until `conveyor bench` measures it.
  const double kSamplingPasses = 9.0;
  double bytes = params * w.dtype_bytes + kSamplingPasses * tokens * s.vocab / w.tensor * 4.0;
  return roofline(2.0 * tokens * params, bytes, dev);
}

double embed_time(const ModelSpec& s, const Workload& w, const DeviceCeilings& dev, double tokens) {
  return roofline(0, tokens * s.hidden * w.dtype_bytes * 2.0, dev);
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
  const int M = w.micro_batches > 0 ? w.micro_batches : P;
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
  double layer_w = layer_params(spec) / w.tensor * w.dtype_bytes;
  double head_w = static_cast<double>(spec.vocab) * spec.hidden / w.tensor * w.dtype_bytes;
  double kv_per_layer_token = 2.0 * kv_heads_per_rank(spec, w.tensor) * spec.head_dim * w.kv_dtype_bytes;
  int layer = 0;
  double t_max = 0, t_sum = 0;
  for (int s = 0; s < P; ++s) {
    StageCost c;
    c.first_layer = layer;
    c.last_layer = layer + counts[s];
    layer = c.last_layer;
    c.time_s = counts[s] * cost[0] + (s == 0 ? first : 0.0) + (s == P - 1 ? last : 0.0);
    c.weight_bytes = counts[s] * layer_w + (s == 0 ? head_w : 0.0) +
                     (s == P - 1 && (!spec.tie_word_embeddings || P > 1) ? head_w : 0.0);
    c.kv_bytes_per_token = counts[s] * kv_per_layer_token;
    double free_bytes = dev.memory * dev.memory_utilization - c.weight_bytes;
    c.kv_tokens = free_bytes > 0 ? free_bytes / c.kv_bytes_per_token : 0;
    if (free_bytes <= 0 && plan.fits) {
      plan.fits = false;
      plan.why_not = "stage " + std::to_string(s) + " needs " + format_bytes(c.weight_bytes) +
                     " of weights per rank but only " + format_bytes(dev.memory * dev.memory_utilization) +
                     " may be used";
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

std::string format_plan(const ModelSpec& spec, const Workload& w, const PartitionPlan& plan) {
  std::ostringstream os;
  int M = w.micro_batches > 0 ? w.micro_batches : w.pipeline;
  os << "model: " << architecture_name(spec.architecture) << ", " << spec.layers << " layers, hidden " << spec.hidden
     << ", vocab " << spec.vocab << "\nlayout: pipeline " << w.pipeline << " x tensor " << w.tensor << ", "
     << M << " micro-batches of " << w.batch / M << " sequences, context " << w.context << "\n\n";
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

}  // namespace conveyor
