// The step budget a run schedules with (scheduler.max_num_seqs, scheduler.max_num_batched_tokens) when
// the keys are 0 ("auto"): the largest batch whose sequences of the expected length all fit in the KV
// room. A value the user set always wins. The memory plan sizes its buffers by the budget before the KV
// room is known, so the room is asked per candidate budget (a function); the choice is pure, and every
// caller (the CUDA and CPU stages, the local runner, `conveyor plan`) makes it with the same rule.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace conveyor {

struct BatchBudget {
  int64_t max_num_seqs = 0;            // sequences per step (0: auto)
  int64_t max_num_batched_tokens = 0;  // new tokens per step (0: auto)
};

// The candidates one backend chooses among: sequence counts largest first, and the token budget an auto
// max_num_batched_tokens takes (raised to max_num_seqs, so a step can hold a decode of every sequence).
struct BatchRule {
  std::vector<int64_t> seq_candidates;
  int64_t token_budget = 8192;
};
// GPU: up to 1024 sequences; 8192 tokens (the activation pool grows with the token budget, and a
// decode-full step gains nothing from longer prefill chunks).
BatchRule gpu_batch_rule();
// CPU: up to 256 sequences (the old default) and 8192 tokens (the old default, which CPU runs keep).
BatchRule cpu_batch_rule();

// The sequence length an auto budget is chosen for: the workload's prompt + output tokens when the
// command knows them (workload_len > 0, e.g. bench's --input-len + --output-len), else
// min(context_len, kFallbackSeqLen); never above context_len (model.max_model_len or the model's).
constexpr int64_t kFallbackSeqLen = 2048;
int64_t expected_seq_len(int64_t workload_len, int64_t context_len);

struct BudgetRequest {
  BatchBudget user;          // the keys as configured (0: auto)
  int64_t seq_len = kFallbackSeqLen;  // expected tokens per sequence (expected_seq_len)
  int block_size = 16;       // a sequence takes whole KV blocks
  BatchRule rule;
};

struct BatchChoice {
  BatchBudget budget;            // both > 0
  bool seqs_from_user = false;   // scheduler.max_num_seqs was set
  bool tokens_from_user = false; // scheduler.max_num_batched_tokens was set
};

// KV tokens the memory holds once the step buffers are sized for `budget`; not increasing as the budget
// grows. A caller whose KV does not depend on the budget returns a constant.
using KvTokensFor = std::function<int64_t(const BatchBudget& budget)>;

// The user's values where set; else the largest candidate (<= the user's token budget when that is set)
// whose KV room holds max_num_seqs sequences of seq_len, refined up to the sequences that room holds
// below the next larger candidate; 1 when even one does not fit. Auto max_num_batched_tokens is
// max(rule.token_budget, max_num_seqs).
BatchChoice choose_batch(const BudgetRequest& request, const KvTokensFor& kv_tokens);
// The same where the KV room does not depend on the budget (the CPU's pool, cache.num_blocks, a plan).
BatchChoice choose_batch(const BudgetRequest& request, int64_t kv_tokens);

// The start-up line: "batch from memory: max_num_seqs 384, max_num_batched_tokens 8192 (KV holds 786,432
// tokens = 384 sequences of 2,048; set --max-num-seqs to override)", naming a value the user set as
// theirs. kv_tokens: what the run's KV cache holds (the agreed blocks x block_size); the sequences it
// holds count whole blocks of request.block_size, as choose_batch does.
std::string describe_batch(const BatchChoice& choice, const BudgetRequest& request, int64_t kv_tokens);

}  // namespace conveyor
