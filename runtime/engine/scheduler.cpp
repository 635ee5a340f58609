// Scheduler: one plan per call. A sequence joins a plan as soon as its chunk is reserved and is marked
// in flight from then on, which both keeps it out of later plans and protects its blocks from
// preemption until on_step_done(). Admission never preempts: running sequences own the pool first.
#include "runtime/engine/scheduler.h"

#include <algorithm>

#include "runtime/config/config.h"
#include "runtime/core/error.h"

namespace conveyor {

SchedulerConfig SchedulerConfig::from_config(const Config& config) {
  SchedulerConfig c;
  c.max_num_seqs = config.get_int("scheduler.max_num_seqs");
  c.max_num_batched_tokens = config.get_int("scheduler.max_num_batched_tokens");
  c.enable_chunked_prefill = config.get_bool("scheduler.enable_chunked_prefill");
  return c;
}

SchedulerConfig SchedulerConfig::per_micro_batch(int micro_batches) const {
  SchedulerConfig c = *this;
  if (micro_batches <= 1) return c;
  const int64_t m = micro_batches;
  c.max_num_seqs = std::max<int64_t>(1, (max_num_seqs + m - 1) / m);
  if (enable_chunked_prefill) c.max_num_batched_tokens = std::max<int64_t>(c.max_num_seqs, (max_num_batched_tokens + m - 1) / m);
  return c;
}

Scheduler::Scheduler(SchedulerConfig config, int num_blocks, int block_size)
    : config_(config), allocator_(num_blocks), block_size_(block_size) {
  CONVEYOR_CHECK(num_blocks > 0, "the KV cache has no blocks; give it more memory (cache.num_blocks or "
                 "cache.cpu_kv_cache_space)");
  CONVEYOR_CHECK(block_size > 0, "KV block size must be positive, got ", block_size);
  CONVEYOR_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0,
                 "scheduler.max_num_seqs and scheduler.max_num_batched_tokens must be positive");
}

void Scheduler::add(int64_t id, std::vector<int32_t> prompt_ids, int64_t max_len) {
  CONVEYOR_CHECK(!seqs_.count(id), "sequence id ", id, " is already queued; request ids must be unique");
  CONVEYOR_CHECK(!prompt_ids.empty(), "sequence ", id, " has an empty prompt");
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  max_len = std::max(max_len, prompt_len + 1);
  const int64_t blocks = (max_len + block_size_ - 1) / block_size_;
  std::string error;
  if (blocks > allocator_.num_blocks()) {
    error = "sequence of up to " + std::to_string(max_len) + " tokens (prompt " + std::to_string(prompt_len) +
            " + max_tokens) needs " + std::to_string(blocks) + " KV blocks of " + std::to_string(block_size_) +
            " tokens, but the cache has only " + std::to_string(allocator_.num_blocks()) +
            "; lower max_tokens or give the KV cache more memory (cache.num_blocks, cache.cpu_kv_cache_space)";
  } else if (!config_.enable_chunked_prefill && max_len > config_.max_num_batched_tokens) {
    // Without chunks a recompute after preemption runs prompt + outputs in one plan.
    error = "sequence of up to " + std::to_string(max_len) + " tokens cannot run in one step of " +
            std::to_string(config_.max_num_batched_tokens) +
            " tokens (scheduler.max_num_batched_tokens) with chunked prefill off; enable "
            "scheduler.enable_chunked_prefill or raise the token budget";
  }
  if (!error.empty()) {
    failed_.push_back({id, error});
    ++stats_.failed;
    return;
  }
  auto seq = std::make_unique<Sequence>(id, next_arrival_++, std::move(prompt_ids), allocator_, block_size_);
  waiting_.push_back(seq.get());
  seqs_.emplace(id, std::move(seq));
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  plan.step = next_step_;
  Budget budget{config_.max_num_batched_tokens, config_.max_num_seqs};
  bool preempted = false;
  schedule_running(/*decodes=*/true, budget, plan, &preempted);
  schedule_running(/*decodes=*/false, budget, plan, &preempted);
  // After a preemption the pool is short: admitting now would only be preempted again (thrash),
  // unless the plan is empty, when the oldest waiting sequence must be let in to make progress.
  if (!preempted || plan.seqs.empty()) admit_waiting(budget, plan);
  if (!plan.seqs.empty()) {
    ++next_step_;
    ++plans_in_flight_;
    ++stats_.plans;
    stats_.scheduled_tokens += static_cast<int64_t>(plan.num_tokens());
  }
  return plan;
}

void Scheduler::schedule_running(bool decodes, Budget& budget, StepPlan& plan, bool* preempted) {
  // A snapshot: preemption removes entries from running_ while we walk it.
  const std::vector<Sequence*> order = running_;
  for (Sequence* s : order) {
    if (budget.tokens == 0 || budget.seqs == 0) return;
    if (s->status != SeqStatus::kRunning || s->in_flight) continue;
    const int32_t left = s->num_uncomputed();
    if ((left == 1) != decodes) continue;
    int32_t n = left;
    if (n > budget.tokens) {
      if (!config_.enable_chunked_prefill) continue;
      n = static_cast<int32_t>(budget.tokens);
    }
    if (!reserve(*s, n, preempted)) continue;
    add_chunk(*s, n, budget, plan);
  }
}

void Scheduler::admit_waiting(Budget& budget, StepPlan& plan) {
  while (!waiting_.empty() && budget.tokens > 0 && budget.seqs > 0) {
    Sequence& s = *waiting_.front();
    int32_t n = s.num_uncomputed();
    if (n > budget.tokens) {
      if (!config_.enable_chunked_prefill) return;  // first come, first served: no overtaking
      n = static_cast<int32_t>(budget.tokens);
    }
    if (s.blocks.append(n) != AppendResult::kOk) return;
    waiting_.pop_front();
    s.status = SeqStatus::kRunning;
    insert_running(&s);
    add_chunk(s, n, budget, plan);
  }
}

bool Scheduler::reserve(Sequence& s, int32_t n, bool* preempted) {
  const int need = s.num_computed + n - s.blocks.num_tokens();
  if (need <= 0) return true;
  while (s.blocks.append(need) != AppendResult::kOk) {
    Sequence* victim = youngest_preemptible();
    if (!victim) return false;  // every other holder is in flight; wait for its result
    preempt(*victim);
    *preempted = true;
    if (victim == &s) return false;
  }
  return true;
}

Sequence* Scheduler::youngest_preemptible() {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it)
    if (!(*it)->in_flight) return *it;
  return nullptr;
}

void Scheduler::preempt(Sequence& s) {
  s.blocks.free_all();
  s.num_computed = 0;  // prompt + outputs so far are recomputed; the outputs stay outputs
  s.status = SeqStatus::kWaiting;
  ++s.num_preemptions;
  ++stats_.preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), &s));
  insert_waiting(&s);
}

void Scheduler::add_chunk(Sequence& s, int32_t n, Budget& budget, StepPlan& plan) {
  SeqChunk c;
  c.seq_id = s.id;
  c.start_pos = s.num_computed;
  c.tokens.reserve(n);
  for (int32_t p = s.num_computed; p < s.num_computed + n; ++p) c.tokens.push_back(s.token(p));
  c.block_table = s.blocks.blocks();
  c.wants_logits = s.num_computed + n == s.num_tokens();
  plan.seqs.push_back(std::move(c));
  s.in_flight = true;
  budget.tokens -= n;
  budget.seqs -= 1;
}

void Scheduler::on_step_done(const StepPlan& plan, const std::vector<int32_t>& sampled) {
  CONVEYOR_CHECK(sampled.size() == plan.num_logits(), "step ", plan.step, " returned ", sampled.size(),
                 " sampled tokens for ", plan.num_logits(), " sequences that asked for logits");
  CONVEYOR_CHECK(plans_in_flight_ > 0, "step ", plan.step, " came back but no plan is in flight");
  size_t k = 0;
  for (const SeqChunk& c : plan.seqs) {
    Sequence& s = get(c.seq_id);
    CONVEYOR_CHECK(s.in_flight && s.num_computed == c.start_pos, "step ", plan.step, " result for sequence ",
                   c.seq_id, " does not match its state (in flight ", s.in_flight, ", computed ", s.num_computed,
                   ", chunk start ", c.start_pos, ")");
    s.in_flight = false;
    s.num_computed += static_cast<int32_t>(c.tokens.size());
    if (c.wants_logits) s.output_ids.push_back(sampled[k++]);
  }
  --plans_in_flight_;
}

void Scheduler::finish(int64_t id) {
  Sequence& s = get(id);
  CONVEYOR_CHECK(!s.in_flight, "sequence ", id, " cannot finish while a step computing it is in flight");
  s.blocks.free_all();
  running_.erase(std::remove(running_.begin(), running_.end(), &s), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), &s), waiting_.end());
  seqs_.erase(id);
}

std::vector<FailedSequence> Scheduler::take_failed() {
  std::vector<FailedSequence> out;
  out.swap(failed_);
  return out;
}

const Sequence& Scheduler::sequence(int64_t id) const {
  auto it = seqs_.find(id);
  CONVEYOR_CHECK(it != seqs_.end(), "no sequence with id ", id, " is scheduled");
  return *it->second;
}

Sequence& Scheduler::get(int64_t id) { return const_cast<Sequence&>(static_cast<const Scheduler*>(this)->sequence(id)); }

void Scheduler::insert_running(Sequence* s) {
  auto pos = std::upper_bound(running_.begin(), running_.end(), s,
                              [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  running_.insert(pos, s);
}

void Scheduler::insert_waiting(Sequence* s) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), s,
                              [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  waiting_.insert(pos, s);
}

}  // namespace conveyor
