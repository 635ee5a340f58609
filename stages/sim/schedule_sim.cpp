// The schedule simulation (see schedule_sim.h). Times are seconds from the submission of every request.
#include "stages/sim/schedule_sim.h"

#include <algorithm>
#include <deque>

#include "runtime/core/error.h"
#include "runtime/core/percentile.h"
#include "runtime/engine/scheduler.h"
#include "stages/partitioner.h"

namespace conveyor {

namespace {

// Activations cross links in bf16 also in FP8 runs (GEMM outputs are 16-bit).
constexpr double kActivationBytes = 2.0;

struct Edge {
  LinkSpec link;
  bool crosses = false;
};

// The link between the stages holding ranks of pipeline positions a and b, in any replica: the network
// when some replica's pair lies on two nodes.
Edge edge_between(const ClusterSpec& c, const SimLayout& l, int a, int b) {
  Edge e{c.intra_node, false};
  for (int d = 0; d < l.data; ++d) {
    const int ra = (d * l.pipeline + a) * l.tensor, rb = (d * l.pipeline + b) * l.tensor;
    if (ra / c.gpus_per_node != rb / c.gpus_per_node) e = Edge{c.network, true};
  }
  return e;
}

StepWork work_of(const StepPlan& plan) {
  StepWork w;
  double ctx = 0;
  for (const SeqChunk& c : plan.seqs) {
    const double n = static_cast<double>(c.tokens.size());
    if (n == 1 && c.start_pos > 0) {
      w.decodes += 1;
      ctx += c.start_pos + 1;
    } else {
      w.prefill_tokens += n;
      w.prefill_pairs += n * c.start_pos + n * (n + 1) / 2;
    }
    if (c.wants_logits) w.logits += 1;
  }
  w.decode_context = w.decodes > 0 ? ctx / w.decodes : 0;
  return w;
}

struct StageTime {
  double compute = 0, allreduce = 0, send = 0;
};

class PipelineModel {
 public:
  PipelineModel(const ModelSpec& spec, const ClusterSpec& c, const SimLayout& l, const Workload& w,
                const std::vector<int>& counts)
      : spec_(spec), dev_(c.ceilings()), links_(c.tensor_links()), w_(w), counts_(counts) {
    for (int s = 0; s + 1 < l.pipeline; ++s) edges_.push_back(edge_between(c, l, s, s + 1));
    back_ = l.pipeline > 1 ? edge_between(c, l, l.pipeline - 1, 0).link.latency : 0.0;
  }
  const std::vector<Edge>& edges() const { return edges_; }
  double result_latency() const { return back_; }

  std::vector<StageTime> times(const StepPlan& plan) const {
    const StepWork work = work_of(plan);
    const StepTimes st = step_times(spec_, w_, dev_, work);
    const double rows = work.decodes + work.prefill_tokens, act = rows * spec_.hidden * kActivationBytes;
    const double T = w_.tensor;
    auto collective = [&](double bytes, double share) {
      return T > 1 ? links_.allreduce_latency + bytes * share * (T - 1) / T / links_.allreduce_busbw : 0.0;
    };
    const double ar = collective(act, 2.0), gather = collective(work.logits * spec_.vocab * 4.0, 1.0);
    const size_t P = counts_.size();
    std::vector<StageTime> t(P);
    for (size_t s = 0; s < P; ++s) {
      const bool first = s == 0, last = s + 1 == P;
      t[s].compute = counts_[s] * st.layer + (first ? st.embed : 0.0) + (last ? st.head : 0.0) +
                     dev_.measured.step_overhead_s;
      t[s].allreduce = 2.0 * counts_[s] * ar + (first ? ar : 0.0) + (last ? gather : 0.0);
      if (!last) t[s].send = edges_[s].link.latency + act / edges_[s].link.bandwidth;
    }
    return t;
  }

 private:
  const ModelSpec& spec_;
  DeviceCeilings dev_;
  LinkCosts links_;
  Workload w_;
  std::vector<int> counts_;
  std::vector<Edge> edges_;
  double back_ = 0;
};

struct InFlight {
  StepPlan plan;
  double done = 0;  // its result is at the leader
};

struct RequestTimes {
  int64_t outputs = 0;
  double first = 0, last = 0;
};

// Engine::step's loop over simulated stages; fills r's timings and stage usage.
void run(const PipelineModel& model, const SimWorkload& w, int M, int64_t requests, int64_t num_blocks, SimResult* r) {
  SchedulerConfig sc;
  sc.max_num_seqs = w.max_num_seqs;
  sc.max_num_batched_tokens = w.max_num_batched_tokens;
  sc.enable_chunked_prefill = w.enable_chunked_prefill;
  Scheduler sched(sc.per_micro_batch(M), static_cast<int>(num_blocks), w.block_size);
  for (int64_t i = 0; i < requests; ++i)
    sched.add(i, std::vector<int32_t>(static_cast<size_t>(w.input_len), 1), w.input_len + w.output_len);
  const auto failed = sched.take_failed();
  CONVEYOR_CHECK(failed.empty(), "simulated request refused: ", failed.empty() ? "" : failed.front().error);
  std::vector<RequestTimes> req(static_cast<size_t>(requests));
  const size_t P = r->stages.size();
  std::vector<double> free_at(P, 0.0);
  std::deque<InFlight> q;
  double leader = 0;
  while (sched.has_unfinished()) {
    while (static_cast<int>(q.size()) < M) {
      StepPlan plan = sched.schedule();
      if (plan.seqs.empty()) break;
      r->peak_running = std::max<int64_t>(r->peak_running, static_cast<int64_t>(sched.num_running()));
      const std::vector<StageTime> t = model.times(plan);
      double arrive = leader;
      for (size_t s = 0; s < P; ++s) {
        const double start = std::max(arrive, free_at[s]);
        free_at[s] = start + t[s].compute + t[s].allreduce;
        if (s == 0) leader = free_at[0];  // stage 0 runs inside the leader's submit()
        arrive = free_at[s] + t[s].send;
        r->stages[s].compute_s += t[s].compute;
        r->stages[s].allreduce_s += t[s].allreduce;
        r->stages[s].send_s += t[s].send;
      }
      q.push_back({std::move(plan), free_at[P - 1] + model.result_latency()});
    }
    CONVEYOR_CHECK(!q.empty(), "internal: the simulated scheduler planned nothing with ", sched.num_waiting(),
                   " waiting and ", sched.num_running(), " running");
    InFlight f = std::move(q.front());
    q.pop_front();
    leader = std::max(leader, f.done);
    sched.on_step_done(f.plan, std::vector<int32_t>(f.plan.num_logits(), 1));
    for (const SeqChunk& c : f.plan.seqs) {
      if (!c.wants_logits) continue;
      RequestTimes& rt = req[static_cast<size_t>(c.seq_id)];
      if (rt.outputs++ == 0) rt.first = leader;
      rt.last = leader;
      if (rt.outputs == w.output_len) sched.finish(c.seq_id);
    }
  }
  r->elapsed_s = leader;
  r->plans = sched.stats().plans;
  r->preemptions = sched.stats().preemptions;
  std::vector<double> ttft, tpot;
  for (const RequestTimes& rt : req) {
    ttft.push_back(rt.first);
    if (rt.outputs > 1) tpot.push_back((rt.last - rt.first) / static_cast<double>(rt.outputs - 1));
  }
  r->ttft_p50 = percentile(ttft, 0.5), r->ttft_p90 = percentile(ttft, 0.9), r->ttft_p99 = percentile(ttft, 0.99);
  r->tpot_p50 = percentile(tpot, 0.5), r->tpot_p90 = percentile(tpot, 0.9), r->tpot_p99 = percentile(tpot, 0.99);
}

}  // namespace

SimResult simulate_layout(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w, const SimLayout& l) {
  CONVEYOR_CHECK(w.num_prompts >= 1 && w.input_len >= 1 && w.output_len >= 1, "the workload needs prompts, input "
                 "and output lengths >= 1");
  SimResult r;
  r.layout = l;
  const int M = micro_batches_for(l.micro_batches, l.pipeline);
  r.layout.micro_batches = M;
  Workload pw;  // the partition the run plans (layout_plan.h): batch = max_num_seqs, the default context
  pw.batch = w.max_num_seqs;
  pw.pipeline = l.pipeline;
  pw.tensor = l.tensor;
  pw.micro_batches = M;
  pw.dtype_bytes = pw.kv_dtype_bytes = pw.weight_dtype_bytes = cluster.dtype_bytes();
  DeviceCeilings dev = cluster.ceilings();
  dev.memory_utilization = w.memory_utilization;
  const PartitionPlan plan = plan_partition(spec, pw, dev, l.partition);
  std::vector<int> counts;
  double kv_tokens = 1e300;
  for (const StageCost& c : plan.stages) {
    counts.push_back(c.last_layer - c.first_layer);
    kv_tokens = std::min(kv_tokens, c.kv_tokens);
    SimStage s;
    s.first_layer = c.first_layer, s.last_layer = c.last_layer, s.weight_bytes = c.weight_bytes;
    r.stages.push_back(s);
  }
  r.fits = plan.fits;
  r.why_not = plan.why_not;
  r.num_blocks = static_cast<int64_t>(kv_tokens / w.block_size);
  const int64_t seq_blocks = (w.input_len + w.output_len + w.block_size - 1) / w.block_size;
  if (r.fits && r.num_blocks < seq_blocks) {
    r.fits = false;
    r.why_not = "KV for " + std::to_string(r.num_blocks * w.block_size) + " tokens per rank, less than one sequence of " +
                std::to_string(w.input_len + w.output_len);
  }
  for (size_t s = 0; s < r.stages.size(); ++s)
    r.stages[s].kv_bytes = static_cast<double>(r.num_blocks) * w.block_size * plan.stages[s].kv_bytes_per_token;
  if (!r.fits) return r;

  const PipelineModel model(spec, cluster, l, pw, counts);
  for (size_t s = 0; s + 1 < r.stages.size(); ++s) r.stages[s].edge_crosses_node = model.edges()[s].crosses;
  r.replica_requests = (w.num_prompts + l.data - 1) / l.data;
  run(model, w, M, r.replica_requests, r.num_blocks, &r);
  for (SimStage& s : r.stages) s.bubble = 1.0 - (s.compute_s + s.allreduce_s) / r.elapsed_s;
  // The replica with the largest share finishes last.
  r.output_tokens_per_s = static_cast<double>(w.num_prompts) * w.output_len / r.elapsed_s;
  r.per_gpu_tokens_per_s = r.output_tokens_per_s / l.gpus();
  return r;
}

}  // namespace conveyor
