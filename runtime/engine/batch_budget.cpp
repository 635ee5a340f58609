// choose_batch and its start-up line (see batch_budget.h). A candidate fits when its KV room, measured
// with the buffers sized for it, holds that many sequences of the expected length in whole blocks.
#include "runtime/engine/batch_budget.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

int64_t token_budget_for(const BudgetRequest& r, int64_t seqs) {
  return r.user.max_num_batched_tokens > 0 ? r.user.max_num_batched_tokens : std::max(r.rule.token_budget, seqs);
}

// The sequence counts to try, largest first: the rule's, none above a token budget the user set (a step
// holds no more sequences than tokens), which then leads as a candidate of its own.
std::vector<int64_t> candidates(const BudgetRequest& r) {
  const int64_t cap = r.user.max_num_batched_tokens;
  std::vector<int64_t> out;
  if (cap > 0 && (r.rule.seq_candidates.empty() || cap < r.rule.seq_candidates.front())) out.push_back(cap);
  for (int64_t s : r.rule.seq_candidates)
    if (cap <= 0 || s < cap) out.push_back(s);
  return out;
}

// The KV tokens one sequence of the expected length takes: whole blocks.
int64_t whole_blocks(const BudgetRequest& r) {
  return std::max<int64_t>(1, (r.seq_len + r.block_size - 1) / r.block_size * r.block_size);
}

// 1234567 -> "1,234,567".
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return v < 0 ? "-" + digits : digits;
}

}  // namespace

BatchRule gpu_batch_rule() { return {{1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1}, 8192}; }

BatchRule cpu_batch_rule() { return {{256, 128, 64, 32, 16, 8, 4, 2, 1}, 8192}; }

int64_t expected_seq_len(int64_t workload_len, int64_t context_len) {
  const int64_t len = workload_len > 0 ? workload_len : kFallbackSeqLen;
  return std::max<int64_t>(1, context_len > 0 ? std::min(len, context_len) : len);
}

BatchChoice choose_batch(const BudgetRequest& r, const KvTokensFor& kv_tokens) {
  CONVEYOR_CHECK(r.seq_len >= 1 && r.block_size >= 1, "choose_batch: the expected sequence length (", r.seq_len,
                 ") and the block size (", r.block_size, ") must be >= 1");
  BatchChoice c;
  c.seqs_from_user = r.user.max_num_seqs > 0;
  c.tokens_from_user = r.user.max_num_batched_tokens > 0;
  auto budget = [&](int64_t seqs) { return BatchBudget{seqs, token_budget_for(r, seqs)}; };
  if (c.seqs_from_user) {
    c.budget = budget(r.user.max_num_seqs);
    return c;
  }
  const int64_t need = whole_blocks(r);
  auto holds = [&](int64_t seqs) { return kv_tokens(budget(seqs)) / need; };
  int64_t chosen = 1, above = 0;  // above: the smallest candidate that did not fit (0: none)
  for (int64_t s : candidates(r)) {
    if (s >= 1 && holds(s) >= s) {
      chosen = s;
      break;
    }
    above = s;
  }
  // Between two candidates: the most sequences the room holds with the buffers sized for them (a fit is
  // monotone: the room does not grow with the batch), by bisection.
  if (above > chosen + 1) {
    int64_t lo = chosen, hi = std::min(above - 1, holds(chosen));
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (holds(mid) >= mid) lo = mid;
      else hi = mid - 1;
    }
    chosen = lo;
  }
  c.budget = budget(chosen);
  return c;
}

BatchChoice choose_batch(const BudgetRequest& r, int64_t kv_tokens) {
  return choose_batch(r, [kv_tokens](const BatchBudget&) { return kv_tokens; });
}

std::string describe_batch(const BatchChoice& c, const BudgetRequest& r, int64_t kv_tokens) {
  auto part = [](const char* name, int64_t v, bool user) {
    return std::string(name) + " " + std::to_string(v) + (user ? " (your value)" : "");
  };
  std::string line = c.seqs_from_user && c.tokens_from_user ? "batch as configured: " : "batch from memory: ";
  line += part("max_num_seqs", c.budget.max_num_seqs, c.seqs_from_user) + ", " +
          part("max_num_batched_tokens", c.budget.max_num_batched_tokens, c.tokens_from_user);
  line += " (KV holds " + grouped(kv_tokens) + " tokens = " + grouped(kv_tokens / whole_blocks(r)) +
          " sequences of " + grouped(r.seq_len);
  if (!c.seqs_from_user && !c.tokens_from_user) line += "; set --max-num-seqs / --max-num-batched-tokens to override";
  else if (!c.seqs_from_user) line += "; set --max-num-seqs to override";
  else if (!c.tokens_from_user) line += "; set --max-num-batched-tokens to override";
  return line + ")";
}

}  // namespace conveyor
