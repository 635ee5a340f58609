// The schedule simulation (see schedule_sim.h). Times are seconds from the submission of every request.
#include "stages/sim/schedule_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <random>
#include <set>

#include "kernels/gemm_tuning.h"
#include "runtime/core/error.h"
#include "runtime/core/percentile.h"
#include "runtime/engine/batch_budget.h"
#include "runtime/engine/scheduler.h"
#include "stages/partitioner.h"
#include "stages/sim/cpu_run_queues.h"
#include "stages/sim/hop_draws.h"
#include "stages/stage_options.h"

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
  double compute = 0, allreduce = 0, overhead = 0, send = 0;
  double turn = 0;  // a TP rank's work between two of its all-reduces in the layers (0: no TP, no such waits)
  double work() const { return compute + allreduce + overhead; }  // what occupies the stage's ranks
};

class PipelineModel {
 public:
  PipelineModel(const ModelSpec& spec, const ClusterSpec& c, const SimLayout& l, const Workload& w,
                const std::vector<int>& counts)
      : spec_(spec), dev_(c.ceilings()), links_(c.tensor_links()), w_(w), counts_(counts),
        activation_bytes_(c.precision == Precision::kFp32 ? 4.0 : kActivationBytes) {
    for (int s = 0; s + 1 < l.pipeline; ++s) edges_.push_back(edge_between(c, l, s, s + 1));
    back_ = l.pipeline > 1 ? edge_between(c, l, l.pipeline - 1, 0).link.latency : 0.0;
    place(c, l);
  }
  const std::vector<Edge>& edges() const { return edges_; }
  double result_latency() const { return back_; }
  const CoreSharing& sharing() const { return dev_.measured.sharing; }
  int node_of(size_t stage) const { return node_of_stage_[stage]; }
  int nodes() const { return static_cast<int>(ranks_on_node_.size()); }
  // The stickiness doctor measured for the node's ranks (CoreSharing::sticky).
  double node_sticky(int node) const { return node_sticky_[static_cast<size_t>(node)]; }
  // One rank per stage and node, no TP (a rank that waits in all-reduces is placed by cpu_node_rates'
  // turns instead), and doctor measured where a woken rank lands: the node's CPUs run queues of their own.
  bool per_cpu_queues() const { return per_cpu_queues_; }
  // Hops between stages take a draw from doctor's samples (EventLoop::hop), not their mean.
  bool hops_drawn() const {
    return node_of_stage_.size() > 1 && (!sharing().hop_samples_s.empty() || !sharing().busy_hop_samples_s.empty());
  }
  // The node's sharing as a pipeline of its ranks meets it (CoreSharing::in_pipeline), for the run queues.
  const CoreSharing& pipeline_sharing(int node) const { return in_pipeline_[static_cast<size_t>(node)]; }
  // Ranks of `stage` (all replicas, all TP ranks) on `node`.
  int ranks_on(int node, size_t stage) const { return ranks_on_node_[static_cast<size_t>(node)][stage]; }

  std::vector<StageTime> times(const StepWork& work) const {
    const StepTimes st = step_times(spec_, w_, dev_, work);
    const double rows = work.decodes + work.prefill_tokens, act = rows * spec_.hidden * activation_bytes_;
    const double T = w_.tensor;
    auto collective = [&](double bytes, double share) {
      return T > 1 ? links_.allreduce_latency + bytes * share * (T - 1) / T / links_.allreduce_busbw : 0.0;
    };
    const double ar = collective(act, 2.0), gather = collective(work.logits * spec_.vocab * 4.0, 1.0);
    const size_t P = counts_.size();
    std::vector<StageTime> t(P);
    for (size_t s = 0; s < P; ++s) {
      const bool first = s == 0, last = s + 1 == P;
      t[s].compute = counts_[s] * st.layer + (first ? st.embed : 0.0) + (last ? st.head : 0.0);
      t[s].overhead = dev_.measured.step_overhead_s;
      t[s].allreduce = 2.0 * counts_[s] * ar + (first ? ar : 0.0) + (last ? gather : 0.0);
      if (T > 1) t[s].turn = (st.layer + 2.0 * ar) / 2.0;  // attention | all-reduce | MLP | all-reduce
      if (!last) t[s].send = edges_[s].link.latency + act / edges_[s].link.bandwidth;
    }
    return t;
  }

  // GemmRunner times the first m of each tuning bucket on every stage (kernels/gemm_tuning.h): the
  // plan that meets a bucket first pays for it on each stage, the LM head's on the last. `layers` and
  // `head` hold the buckets met so far.
  void charge_first_use(std::vector<StageTime>& t, const StepWork& work, std::set<int64_t>& layers,
                        std::set<int64_t>& head) const {
    const double rows = work.decodes + work.prefill_tokens;
    if (rows > 0 && layers.insert(gemm_tuning_bucket(std::llround(rows))).second) {
      const double cost = layer_gemm_tuning_time(spec_, w_, dev_, rows);
      for (StageTime& st : t) st.compute += cost;
    }
    if (work.logits > 0 && head.insert(gemm_tuning_bucket(std::llround(work.logits))).second)
      t.back().compute += head_gemm_tuning_time(spec_, w_, dev_, work.logits);
  }

 private:
  // The node of each stage's ranks (replica 0, tp 0) and, per node, every replica's ranks of each stage:
  // replicas run alike, so a stage computing means all its copies compute.
  void place(const ClusterSpec& c, const SimLayout& l) {
    ranks_on_node_.assign(static_cast<size_t>(c.nodes), std::vector<int>(static_cast<size_t>(l.pipeline), 0));
    for (int s = 0; s < l.pipeline; ++s) node_of_stage_.push_back(s * l.tensor / c.gpus_per_node);
    for (int d = 0; d < l.data; ++d)
      for (int s = 0; s < l.pipeline; ++s)
        for (int t = 0; t < l.tensor; ++t)
          ++ranks_on_node_[static_cast<size_t>(((d * l.pipeline + s) * l.tensor + t) / c.gpus_per_node)][static_cast<size_t>(s)];
    const bool queues = !sharing().stickiness.empty() || sharing().quantum_s > 0;  // measured for them
    per_cpu_queues_ = queues && sharing().cpus > 0 && w_.tensor <= 1;
    for (const std::vector<int>& node : ranks_on_node_) {
      int ranks = 0;
      for (int n : node) ranks += n, per_cpu_queues_ = per_cpu_queues_ && n <= 1;
      node_sticky_.push_back(sharing().sticky(ranks));
      in_pipeline_.push_back(sharing().in_pipeline(ranks));
    }
  }

  const ModelSpec& spec_;
  DeviceCeilings dev_;
  LinkCosts links_;
  Workload w_;
  std::vector<int> counts_;
  double activation_bytes_;
  std::vector<Edge> edges_;
  double back_ = 0;
  std::vector<int> node_of_stage_;
  std::vector<std::vector<int>> ranks_on_node_;
  bool per_cpu_queues_ = false;
  std::vector<double> node_sticky_;  // per node
  std::vector<CoreSharing> in_pipeline_;  // per node: sharing() as a pipeline of its ranks meets it
};

struct RequestTimes {
  int64_t outputs = 0;
  double first = 0, last = 0;
};

// Engine::step's loop over simulated stages, event by event. A plan's work on a stage is a task that starts when
// the plan has arrived and the stage is free (plans keep their order on every stage). While k ranks of a node run
// tasks, each runs at sharing.at(k) of its speed alone (or as the run queues or cpu_node_rates give it), so
// starting or ending a task (or a turn) moves the ends of the others on its node; without sharing, its work.
class EventLoop {
 public:
  EventLoop(const PipelineModel& model, const SimWorkload& w, int M, int64_t requests, int64_t num_blocks, SimResult* r,
            bool record, unsigned hop_seed)
      : hop_rng_(hop_seed),
        model_(model),
        w_(w),
        M_(M),
        sched_(scheduler_config(w).per_micro_batch(M), static_cast<int>(num_blocks), w.block_size),
        req_(static_cast<size_t>(requests)), r_(r), P_(r->stages.size()), record_(record) {
    for (int64_t i = 0; i < requests; ++i)
      sched_.add(i, std::vector<int32_t>(static_cast<size_t>(w.input_len), 1), w.input_len + w.output_len);
    const auto failed = sched_.take_failed();
    CONVEYOR_CHECK(failed.empty(), "simulated request refused: ", failed.empty() ? "" : failed.front().error);
    if (w.gemm_warmup) {  // the buckets the start-up warm-up timed (StageModel::warm_up_gemms)
      for (int64_t rows : gemm_warmup_rows(w.max_num_batched_tokens)) tuned_layers_.insert(gemm_tuning_bucket(rows));
      for (int64_t rows : gemm_warmup_rows(std::min(w.max_num_seqs, w.max_num_batched_tokens)))
        tuned_head_.insert(gemm_tuning_bucket(rows));
    }
  }

  void run() {
    leader(0.0);
    while (!finished_) {
      CONVEYOR_CHECK(!events_.empty(), "internal: the simulation stalled with ", sched_.num_running(), " running");
      const Event e = events_.top();
      events_.pop();
      if (e.kind == Event::kTaskEnd) task_end(e);
      if (e.kind == Event::kArrive) {
        flight(e.flight).arrived[e.stage] = true;
        try_start(e.stage, e.t);
      }
      if (e.kind == Event::kStart) {
        tasks_[e.stage].receiving = false;
        begin(e.stage, e.t, e.flight);
      }
      if (e.kind == Event::kResult) {
        flight(e.flight).ready = true;
        if (waiting_ && e.flight == front_) {
          waiting_ = false;
          const double d = P_ > 1 ? hop(0) : 0.0;  // one stage: the result is the leader's own
          if (d > 0) push(Event::kWake, e.t + d, 0, e.flight);
          else leader(e.t);
        }
      }
      if (e.kind == Event::kWake) leader(e.t);
      if (e.kind == Event::kTurn && e.version == turn_version_[e.stage])  // e.stage: the node
        run_queues_[e.stage].end_turns(e.t), share(static_cast<int>(e.stage), e.t);
    }
    r_->plans = sched_.stats().plans;
    r_->preemptions = sched_.stats().preemptions;
    std::vector<double> ttft, tpot;
    for (const RequestTimes& rt : req_) {
      ttft.push_back(rt.first);
      if (rt.outputs > 1) tpot.push_back((rt.last - rt.first) / static_cast<double>(rt.outputs - 1));
    }
    r_->ttft_p50 = percentile(ttft, 0.5), r_->ttft_p90 = percentile(ttft, 0.9), r_->ttft_p99 = percentile(ttft, 0.99);
    r_->tpot_p50 = percentile(tpot, 0.5), r_->tpot_p90 = percentile(tpot, 0.9), r_->tpot_p99 = percentile(tpot, 0.99);
  }

 private:
  struct Flight {
    StepPlan plan;
    std::vector<StageTime> t;
    std::vector<bool> arrived;
    bool ready = false;  // its result is at the leader
  };
  struct Task {
    bool busy = false;       // computing
    bool receiving = false;  // taking its next plan's messages (CoreSharing's hop), not computing
    int64_t flight = 0;
    double start = 0, rate = 1, left = 0, since = 0;  // left: work left at `since`, the last change of rate
    uint64_t version = 0;
    int lost = 0;  // turns lost to ranks sharing its CPU (rate from > 0 to 0), as a run's trace counts them
  };
  struct Event {
    enum Kind { kTaskEnd, kArrive, kStart, kResult, kWake, kTurn } kind;
    double t;
    uint64_t order;  // ties: in the order pushed
    size_t stage;
    int64_t flight;
    uint64_t version;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : order > o.order; }
  };

  static SchedulerConfig scheduler_config(const SimWorkload& w) {
    SchedulerConfig sc;
    sc.max_num_seqs = w.max_num_seqs;
    sc.max_num_batched_tokens = w.max_num_batched_tokens;
    sc.enable_chunked_prefill = w.enable_chunked_prefill;
    return sc;
  }

  Flight& flight(int64_t id) { return flights_[static_cast<size_t>(id - front_)]; }
  const Flight& flight(int64_t id) const { return flights_[static_cast<size_t>(id - front_)]; }
  void push(Event::Kind kind, double t, size_t stage, int64_t f, uint64_t version = 0) {
    events_.push(Event{kind, t, next_order_++, stage, f, version});
  }

  // The leader is free at t: it fills up to M plans (stage 0 runs inside submit), else takes the
  // oldest result when it is there, else waits for it.
  void leader(double t) {
    waiting_ = false;
    for (;;) {
      if (static_cast<int>(flights_.size()) < M_) {
        StepPlan plan = sched_.schedule();
        if (!plan.seqs.empty()) {
          r_->peak_running = std::max<int64_t>(r_->peak_running, static_cast<int64_t>(sched_.num_running()));
          submit(t, std::move(plan));
          return;
        }
      }
      CONVEYOR_CHECK(!flights_.empty(), "internal: the simulated scheduler planned nothing with ", sched_.num_waiting(),
                     " waiting and ", sched_.num_running(), " running");
      if (!flights_.front().ready) {
        waiting_ = true;
        return;
      }
      take_result(t);
      if (!sched_.has_unfinished()) {
        finished_ = true;
        r_->elapsed_s = t;
        return;
      }
    }
  }

  void submit(double t, StepPlan plan) {
    Flight f;
    const StepWork work = work_of(plan);
    f.t = model_.times(work);
    model_.charge_first_use(f.t, work, tuned_layers_, tuned_head_);
    f.plan = std::move(plan);
    f.arrived.assign(P_, false);
    f.arrived[0] = true;
    flights_.push_back(std::move(f));
    queue_[0].push_back(front_ + static_cast<int64_t>(flights_.size()) - 1);
    try_start(0, t);
  }

  void take_result(double t) {
    Flight f = std::move(flights_.front());
    flights_.pop_front();
    ++front_;
    sched_.on_step_done(f.plan, std::vector<int32_t>(f.plan.num_logits(), 1));
    for (const SeqChunk& c : f.plan.seqs) {
      if (!c.wants_logits) continue;
      RequestTimes& rt = req_[static_cast<size_t>(c.seq_id)];
      if (rt.outputs++ == 0) rt.first = t;
      rt.last = t;
      if (rt.outputs == w_.output_len) sched_.finish(c.seq_id);
    }
  }

  // Stage s takes its next plan if it is free and the plan has arrived; every stage but the first
  // spends a hop receiving it (hop(): the message in hand, whether it arrived just now or waited while the
  // stage computed), then computes.
  void try_start(size_t s, double t) {
    Task& task = tasks_[s];
    if (task.busy || task.receiving || queue_[s].empty() || !flight(queue_[s].front()).arrived[s]) return;
    const int64_t f = queue_[s].front();
    queue_[s].pop_front();
    const double d = s > 0 ? hop(s) : 0.0;
    if (d > 0) {
      task.receiving = true;
      push(Event::kStart, t + d, s, f);
    } else {
      begin(s, t, f);
    }
  }

  void begin(size_t s, double t, int64_t f) {
    Task& task = tasks_[s];
    task.busy = true;
    task.flight = f;
    task.start = t;
    task.rate = 1;
    task.left = flight(f).t[s].work();
    task.since = t;
    task.lost = 0;
    if (model_.sharing().any()) {
      task.rate = -1;  // set by share()
      share(model_.node_of(s), t);
    } else {
      push(Event::kTaskEnd, t + task.left, s, f, ++task.version);
    }
  }

  // Each busy stage's rate on `node` (the node's run queues at the speeds a pipeline of its ranks meets,
  // or cpu_node_rates over the busy stages; an idle one's is unused), at time t.
  std::vector<double> shares(int node, double t) {
    if (model_.per_cpu_queues()) {
      std::vector<bool> busy(tasks_.size(), false);
      for (size_t s = 0; s < tasks_.size(); ++s) busy[s] = tasks_[s].busy && model_.node_of(s) == node;
      CpuRunQueues& q = run_queues_[static_cast<size_t>(node)];
      q.settle(busy, t);
      return q.rates(model_.pipeline_sharing(node), model_.node_sticky(node));
    }
    std::vector<int> ranks(tasks_.size(), 0);
    std::vector<double> turns(tasks_.size(), 0.0);
    for (size_t s = 0; s < tasks_.size(); ++s) {
      if (!tasks_[s].busy) continue;
      ranks[s] = model_.ranks_on(node, s);
      turns[s] = flight(tasks_[s].flight).t[s].turn;
    }
    return cpu_node_rates(model_.sharing(), ranks, turns);
  }

  // Every busy task of `node` at the speed its node's busy ranks allow; a task whose rate changes gets a new end
  // (the old end event goes stale), none while its rank waits for its turn (rate 0); the next turn's end too.
  void share(int node, double t) {
    const std::vector<double> rates = shares(node, t);
    for (size_t s = 0; s < tasks_.size(); ++s) {
      Task& task = tasks_[s];
      const double rate = rates[s];
      if (!task.busy || model_.node_of(s) != node || task.rate == rate) continue;
      if (task.rate > 0) task.left = std::max(0.0, task.left - (t - task.since) * task.rate);
      task.lost += task.rate > 0 && rate == 0;
      task.since = t;
      task.rate = rate;
      ++task.version;
      if (rate > 0) push(Event::kTaskEnd, t + task.left / rate, s, task.flight, task.version);
    }
    const size_t n = static_cast<size_t>(node);
    const double turn = model_.per_cpu_queues() ? run_queues_[n].next_turn_end() : INFINITY;
    if (std::isfinite(turn)) push(Event::kTurn, turn, n, 0, ++turn_version_[n]);
  }

  void task_end(const Event& e) {
    Task& task = tasks_[e.stage];
    if (!task.busy || e.version != task.version) return;  // moved by a change of rate
    task.busy = false;
    const size_t s = e.stage;
    const StageTime& st = flight(task.flight).t[s];
    // The wall time splits over the parts as their work does (all run at the task's rate).
    const double stretch = model_.sharing().any() && st.work() > 0 ? (e.t - task.start) / st.work() : 1.0;
    SimStage& out = r_->stages[s];
    out.compute_s += st.compute * stretch;
    out.allreduce_s += st.allreduce * stretch;
    out.overhead_s += st.overhead * stretch;
    out.send_s += st.send;
    if (record_) {
      const int64_t tokens = static_cast<int64_t>(flight(task.flight).plan.num_tokens());
      const CpuRunQueues* q = model_.per_cpu_queues() ? &run_queues_[static_cast<size_t>(model_.node_of(s))] : nullptr;
      r_->spans.push_back({static_cast<int>(s), task.flight, false, task.start, e.t, tokens,
                           q ? q->cpu_of(static_cast<int>(s)) : -1, q ? task.lost : -1});
      if (s + 1 < P_) r_->spans.push_back(SimSpan{static_cast<int>(s), task.flight, true, e.t, e.t + st.send, tokens});
    }
    if (s + 1 < P_) {
      queue_[s + 1].push_back(task.flight);
      push(Event::kArrive, e.t + st.send, s + 1, task.flight);
    } else {
      push(Event::kResult, e.t + model_.result_latency(), s, task.flight);
    }
    // The rates after the stage took its next task, if it could at once: a rank that goes on computing
    // keeps its CPU (CpuRunQueues), where releasing it first would let another rank take it.
    try_start(s, e.t);
    if (s == 0) leader(e.t);
    if (model_.sharing().any()) share(model_.node_of(s), e.t);
  }

  // Where the node's run queues are simulated: whether another rank computes on the CPU that `stage`'s rank
  // last ran on (it naps there, and its wake-ups wait behind that rank's slice).
  bool cpu_taken(int node, size_t stage) const {
    if (!model_.per_cpu_queues()) return false;
    const CpuRunQueues& q = run_queues_[static_cast<size_t>(node)];
    const int mine = q.last_cpu(static_cast<int>(stage));
    if (mine < 0) return false;
    for (size_t s = 0; s < tasks_.size(); ++s)
      if (s != stage && tasks_[s].busy && q.cpu_of(static_cast<int>(s)) == mine) return true;
    return false;
  }

  // How long a rank of `stage` takes to have a message in hand once it turns to it (CoreSharing: a wake-up and
  // MPI's receive); 0 on GPUs. The busy hop where doctor measured it: while the node's CPUs are all computing, or
  // another rank computes on the CPU the receiver naps on (doctor's busy probe has both, its idle probe neither);
  // pp 3's last stage naps on the first's CPU on 2 CPUs: 1.3 ms, not 0.3 (benchmarks/results/cpu/2026-12-06-r13).
  double hop(size_t stage) const {
    const CoreSharing& c = model_.sharing();
    if (!c.any()) return 0.0;
    const int node = model_.node_of(stage);
    int computing = 0;
    for (size_t s = 0; s < tasks_.size(); ++s)
      if (tasks_[s].busy && s != stage) computing += model_.ranks_on(node, s);
    const bool busy = computing >= c.cpus || cpu_taken(node, stage);
    const std::vector<double>& drawn = busy ? c.busy_hop_samples_s : c.hop_samples_s;
    if (drawn.empty()) return busy ? c.busy_hop_s : c.hop_s;
    return drawn[std::uniform_int_distribution<size_t>(0, drawn.size() - 1)(hop_rng_)];
  }
  mutable std::mt19937 hop_rng_;  // which of doctor's hops a hop takes: drawn, from the run's fixed seed

  const PipelineModel& model_;
  const SimWorkload& w_;
  const int M_;
  Scheduler sched_;
  std::vector<RequestTimes> req_;
  SimResult* r_;
  size_t P_;
  bool record_;
  std::vector<Task> tasks_ = std::vector<Task>(P_);
  std::vector<std::deque<int64_t>> queue_ = std::vector<std::deque<int64_t>>(P_);
  std::deque<Flight> flights_;  // in flight, oldest first; flight id - front_ is the index
  int64_t front_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_order_ = 0;
  bool waiting_ = false, finished_ = false;
  std::set<int64_t> tuned_layers_, tuned_head_;  // GEMM tuning buckets met (charge_first_use)
  std::vector<CpuRunQueues> run_queues_ = std::vector<CpuRunQueues>(
      static_cast<size_t>(model_.nodes()), CpuRunQueues(model_.sharing().cpus, model_.sharing().quantum_s));
  std::vector<uint64_t> turn_version_ = std::vector<uint64_t>(static_cast<size_t>(model_.nodes()), 0);
};

// The CPU backend's pool (stages/pipeline_stage.cpp): cache.cpu_kv_cache_space per rank, whatever the
// weights take, in whole blocks of the stage's layers; the ranks agree on the smallest.
int64_t cpu_kv_blocks(const PartitionPlan& plan, const SimWorkload& w) {
  int64_t blocks = std::numeric_limits<int64_t>::max();
  const double budget = std::floor(w.cpu_kv_cache_gib * 1024.0 * 1024.0 * 1024.0);
  for (const StageCost& c : plan.stages)
    blocks = std::min(blocks, static_cast<int64_t>(budget / (c.kv_bytes_per_token * w.block_size)));
  return blocks;
}

// The workload with the step budget a run takes on `num_blocks` (choose_batch, sequences of input +
// output tokens; the CPU rule on a CPU cluster, on GPUs within the decode graphs' reach).
SimWorkload resolved_budget(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w,
                            int64_t num_blocks, int micro_batches) {
  BudgetRequest request;
  request.user = {w.max_num_seqs, w.max_num_batched_tokens};
  request.seq_len = expected_seq_len(w.input_len + w.output_len, spec.context_len(0));
  request.block_size = w.block_size;
  request.rule = cluster.cpu() ? cpu_batch_rule() : gpu_batch_rule_for(/*cuda_graphs=*/true, micro_batches);
  const BatchBudget b = choose_batch(request, num_blocks * w.block_size).budget;
  SimWorkload run = w;
  run.max_num_seqs = b.max_num_seqs;
  run.max_num_batched_tokens = b.max_num_batched_tokens;
  return run;
}

}  // namespace

std::vector<double> cpu_node_rates(const CoreSharing& c, const std::vector<int>& ranks, const std::vector<double>& turns) {
  CONVEYOR_CHECK(ranks.size() == turns.size(), "cpu_node_rates: ", ranks.size(), " groups but ", turns.size(), " turns");
  int k = 0;
  for (int r : ranks) k += r;
  std::vector<double> rate(ranks.size(), c.at(k));
  if (c.slice_s <= 0 || k <= c.cpus) return rate;
  std::vector<double> turn(ranks.size());
  double all = 0, shortest = c.slice_s, longest = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    turn[i] = c.hold(turns[i]);
    all += ranks[i] * turn[i];
    if (ranks[i] > 0) shortest = std::min(shortest, turn[i]), longest = std::max(longest, turn[i]);
  }
  if (shortest == longest) return rate;  // ranks alike: exactly at(k), as without a slice
  for (size_t i = 0; i < ranks.size(); ++i) rate[i] = c.at(k) * k * turn[i] / all;
  return rate;
}

SimResult simulate_layout(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w, const SimLayout& l,
                          bool record) {
  CONVEYOR_CHECK(w.num_prompts >= 1 && w.input_len >= 1 && w.output_len >= 1, "the workload needs prompts, input "
                 "and output lengths >= 1");
  SimResult r;
  r.layout = l;
  const int M = micro_batches_for(l.micro_batches, l.pipeline);
  r.layout.micro_batches = M;
  Workload pw;  // the partition the run plans (layout_plan.h): batch = max_num_seqs, the default context
  pw.batch = w.max_num_seqs > 0 ? w.max_num_seqs : kAutoPlanningBatch;
  pw.max_tokens = w.max_num_batched_tokens;
  pw.pipeline = l.pipeline;
  pw.tensor = l.tensor;
  pw.micro_batches = M;
  pw.dtype_bytes = cluster.activation_bytes();
  pw.kv_dtype_bytes = pw.weight_dtype_bytes = cluster.dtype_bytes();
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
  if (cluster.cpu()) r.num_blocks = cpu_kv_blocks(plan, w);
  if (w.num_blocks > 0) r.num_blocks = w.num_blocks;
  const int64_t seq_blocks = (w.input_len + w.output_len + w.block_size - 1) / w.block_size;
  if (r.fits && r.num_blocks < seq_blocks) {
    r.fits = false;
    r.why_not = "KV for " + std::to_string(r.num_blocks * w.block_size) + " tokens per rank, less than one sequence of " +
                std::to_string(w.input_len + w.output_len);
  }
  for (size_t s = 0; s < r.stages.size(); ++s)
    r.stages[s].kv_bytes = static_cast<double>(r.num_blocks) * w.block_size * plan.stages[s].kv_bytes_per_token;
  if (!r.fits) return r;

  const SimWorkload run = resolved_budget(spec, cluster, w, r.num_blocks, M);
  r.max_num_seqs = run.max_num_seqs;
  r.max_num_batched_tokens = run.max_num_batched_tokens;
  pw.batch = run.max_num_seqs;
  const PipelineModel model(spec, cluster, l, pw, counts);
  for (size_t s = 0; s + 1 < r.stages.size(); ++s) r.stages[s].edge_crosses_node = model.edges()[s].crosses;
  r.replica_requests = (w.num_prompts + l.data - 1) / l.data;
  // Hops drawn from doctor's samples: the mean of kHopDraws runs, each from its own seed (hop_draws.h).
  std::vector<SimResult> draws(model.hops_drawn() ? kHopDraws : 1, r);
  for (size_t d = 0; d < draws.size(); ++d) {
    const unsigned seed = static_cast<unsigned>(d + 1);
    EventLoop(model, run, M, r.replica_requests, r.num_blocks, &draws[d], record && d == 0, seed).run();
  }
  r = mean_of_draws(draws);
  for (SimStage& s : r.stages) s.bubble = 1.0 - (s.compute_s + s.allreduce_s) / r.elapsed_s;
  // The replica with the largest share finishes last.
  r.output_tokens_per_s = static_cast<double>(w.num_prompts) * w.output_len / r.elapsed_s;
  r.per_gpu_tokens_per_s = r.output_tokens_per_s / l.gpus();
  return r;
}

}  // namespace conveyor
