// The leader's scheduler: continuous batching over a waiting and a running queue, paged KV blocks,
// chunked prefill and preemption by recompute. Each schedule() emits one StepPlan (a micro-batch);
// several may be in flight at once (pipeline micro-batches), and a sequence in an unreturned plan is never
// scheduled, preempted or finished until on_step_done() brings its result back.
// Order of service is age (arrival): decodes first, then running prefill chunks, then admissions,
// all oldest first; when blocks run out the youngest running sequence is preempted, so the oldest
// always progresses and every admitted sequence finishes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/block_allocator.h"
#include "runtime/engine/sequence.h"
#include "runtime/engine/step_plan.h"

namespace conveyor {

class Config;

struct SchedulerConfig {
  int64_t max_num_seqs = 256;             // sequences per plan
  int64_t max_num_batched_tokens = 8192;  // new tokens per plan (decodes + prefill chunks)
  bool enable_chunked_prefill = true;     // off: a prefill runs whole in one plan
  // scheduler.* keys; max_num_seqs and max_num_batched_tokens may be 0 (auto, batch_budget.h): the run
  // passes the budget its stages chose, and the Engine resolves what is still 0 from its runner's KV.
  static SchedulerConfig from_config(const Config& config);
  // The budget of one of `micro_batches` plans in flight: max_num_seqs split evenly (so the running
  // set is the configured one and micro-batches take equal stage times), and with chunked prefill
  // the token budget too.
  SchedulerConfig per_micro_batch(int micro_batches) const;
};

struct SchedulerStats {
  int64_t plans = 0;            // non-empty plans emitted
  int64_t scheduled_tokens = 0;
  int64_t preemptions = 0;      // sequences sent back to waiting to be recomputed
  int64_t failed = 0;           // sequences refused because they can never fit
};

// A sequence the scheduler refused, with the reason to show the user.
struct FailedSequence {
  int64_t id = 0;
  std::string error;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, int num_blocks, int block_size);

  // Queues a sequence. max_len bounds its length (prompt + max_tokens, capped by max_model_len);
  // a sequence whose max_len could never be held by the whole KV pool (or, without chunked prefill,
  // by one plan's token budget) is failed at once and reported by take_failed().
  void add(int64_t id, std::vector<int32_t> prompt_ids, int64_t max_len);

  // The next micro-batch; empty when nothing can run now (everything is in flight or done).
  StepPlan schedule();
  // The plan's sampled tokens, one per chunk with wants_logits, in plan order.
  void on_step_done(const StepPlan& plan, const std::vector<int32_t>& sampled);
  // Ends a sequence (not in flight) and returns its blocks.
  void finish(int64_t id);

  std::vector<FailedSequence> take_failed();
  const Sequence& sequence(int64_t id) const;
  bool contains(int64_t id) const { return seqs_.count(id) != 0; }
  bool has_unfinished() const { return !seqs_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  int num_plans_in_flight() const { return plans_in_flight_; }
  const SchedulerStats& stats() const { return stats_; }
  const BlockAllocator& allocator() const { return allocator_; }
  int block_size() const { return block_size_; }

 private:
  struct Budget {
    int64_t tokens;
    int64_t seqs;
  };
  Sequence& get(int64_t id);
  void schedule_running(bool decodes, Budget& budget, StepPlan& plan, bool* preempted);
  void admit_waiting(Budget& budget, StepPlan& plan);
  // Makes room for `n` new tokens of s, preempting the youngest other candidates; false when s itself
  // was preempted or no block can be had now (it then waits for in-flight plans to return).
  bool reserve(Sequence& s, int32_t n, bool* preempted);
  Sequence* youngest_preemptible();
  void preempt(Sequence& s);
  void add_chunk(Sequence& s, int32_t n, Budget& budget, StepPlan& plan);
  void insert_running(Sequence* s);
  void insert_waiting(Sequence* s);

  SchedulerConfig config_;
  BlockAllocator allocator_;
  int block_size_;
  std::map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;   // by arrival, oldest first
  std::vector<Sequence*> running_;  // by arrival, oldest first
  std::vector<FailedSequence> failed_;
  uint64_t next_arrival_ = 0;
  int64_t next_step_ = 0;
  int plans_in_flight_ = 0;
  SchedulerStats stats_;
};

}  // namespace conveyor
