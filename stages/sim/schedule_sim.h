// Discrete-event simulation of one layout's run: the leader's real Scheduler (runtime/engine) plans
// every micro-batch exactly as in `conveyor bench throughput`, and simulated time replaces the GPUs.
// Each stage is a server: a plan starts on stage s when it has arrived and the stage is free, takes
// the cost model's time for its work (stages/partitioner.h step_times, per layer, plus 2 TP all-reduces
// per layer), then crosses the pipeline edge (NVLink inside a node, the network across). Stage 0 runs
// on the leader inside submit(), and the leader loop is Engine::step's: fill up to M plans, wait for
// the oldest result, finish sequences at their max_tokens. Ranks that share a node's cores (the CPU
// backend, device.sharing of its doctor JSON) each run at the measured speed for the number of ranks
// computing at that moment; beyond the node's CPUs a TP rank, which yields its CPU at each all-reduce,
// gets a share by its turns (cpu_node_rates), and TP-less ranks queue on CPUs of their own as the kernel
// places them (cpu_run_queues.h, weighed by doctor's stickiness, at the speeds its ring probe measured for
// a pipeline of that many ranks). Each pipeline hop takes one of doctor's hop samples, drawn, and a layout's
// result is the mean of kHopDraws such runs (hop_draws.h). Data-parallel replicas are identical,
// so one replica is simulated with the largest share of the requests (the router deals them round-robin).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/sim/cluster_spec.h"

namespace conveyor {

// The bench workload: every request submitted at time 0, prompts of input_len, exactly output_len
// generated tokens (EOS ignored), and the scheduler limits the run would use.
struct SimWorkload {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 1024;
  int64_t max_num_seqs = 256;             // 0: per layout, from its KV room (choose_batch), as a run does
  int64_t max_num_batched_tokens = 8192;  // 0: auto
  bool enable_chunked_prefill = true;
  bool gemm_warmup = true;  // runtime.gemm_warmup: GEMM tuning at start-up, none charged to the run
  int block_size = 16;
  double memory_utilization = 0.9;
  double cpu_kv_cache_gib = 4.0;  // a CPU rank's KV pool (cache.cpu_kv_cache_space)
  int64_t num_blocks = 0;         // cache.num_blocks: the KV blocks, overriding memory; 0: from memory
};

struct SimLayout {
  int data = 1, pipeline = 1, tensor = 1;
  int micro_batches = 0;            // 0: = pipeline
  std::vector<int64_t> partition;   // empty: the planner's split, as the run takes it
  int gpus() const { return data * pipeline * tensor; }
};

struct SimStage {
  int first_layer = 0, last_layer = 0;
  double compute_s = 0;     // kernels of every plan (on a CPU: wall time, longer while ranks share cores)
  double allreduce_s = 0;   // TP all-reduces and the LM head's gather
  double overhead_s = 0;    // host work per plan outside the kernels (the stage is occupied, not busy)
  double send_s = 0;        // transfers over the edge to the next stage (0 on the last)
  bool edge_crosses_node = false;
  double bubble = 0;        // 1 - (compute + all-reduce) / run time: what a run's timeline calls bubble
  double weight_bytes = 0;  // per rank
  double kv_bytes = 0;      // per rank: the agreed KV blocks of this stage's layers
};

// A stage's compute of one plan, or its transfer to the next stage, in a simulated run (simulate_layout
// with record = true): the spans a run's --trace holds (stages/pipeline_trace.h), for `conveyor plan --trace`.
struct SimSpan {
  int stage = 0;
  int64_t step = 0;   // the plan, in submission order from 0 (a run's micro-batch number)
  bool send = false;  // the transfer to the next stage, else the compute
  double begin_s = 0, end_s = 0;
  int64_t tokens = 0;
  // A compute span on a CPU node with per-CPU run queues: the simulated CPU it ended on and the turns its rank
  // lost meanwhile (as a run's trace notes them, stages/pipeline_trace.h); -1 otherwise.
  int cpu = -1;
  int preempted = -1;
};

struct SimResult {
  SimLayout layout;
  bool fits = true;
  std::string why_not;
  double elapsed_s = 0;
  double output_tokens_per_s = 0;   // all replicas
  double per_gpu_tokens_per_s = 0;
  double ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;
  double tpot_p50 = 0, tpot_p90 = 0, tpot_p99 = 0;
  std::vector<SimStage> stages;
  int64_t num_blocks = 0;           // KV blocks the ranks agree on (minimum over stages)
  int64_t plans = 0;                // scheduler plans simulated (one replica)
  int64_t preemptions = 0;
  int64_t peak_running = 0;         // most sequences running at once (one replica)
  int64_t replica_requests = 0;
  int64_t max_num_seqs = 0;            // the step budget this layout runs: the workload's, or what
  int64_t max_num_batched_tokens = 0;  // choose_batch makes of its KV room (0: not reached)
  std::vector<SimSpan> spans;          // record = true only: one replica's stages, in the order they end
};

// How fast each group of ranks computing at once on one CPU node runs (its speed over its speed alone):
// group i has ranks[i] ranks, each doing turns[i] solo seconds of work between two of its TP all-reduces
// (0: no such waits). Up to c.cpus ranks, or without a measured slice, every rank runs at c.at(k) (k
// ranks in all). Beyond them the CPUs time-slice, and a rank waiting in a TP all-reduce yields its CPU
// to a co-runner, which keeps it until its own next wait or for c.slice_s: a rank keeps a CPU for
// c.hold(turn) (doctor's measured holds; without them min(turn, slice)), and the ranks split the node's
// k * at(k) in proportion to their holds. Ranks alike
// keep at(k); a TP decode step (short turns) beside a prefill or a TP-less stage gets less.
std::vector<double> cpu_node_rates(const CoreSharing& c, const std::vector<int>& ranks, const std::vector<double>& turns);

// Simulates `layout` on `cluster` for workload `w`; a layout whose weights or KV cannot fit returns
// fits = false with the reason and no run.
// record: keep every stage's compute and transfer spans (SimResult::spans).
SimResult simulate_layout(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w,
                          const SimLayout& layout, bool record = false);

}  // namespace conveyor
