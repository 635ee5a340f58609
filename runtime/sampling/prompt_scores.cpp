// Logprob helpers (see prompt_scores.h).
#include "runtime/sampling/prompt_scores.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace conveyor {

double log_normalizer(const float* logits, int64_t vocab) {
  float m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - m);
  return m + std::log(sum);
}

TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t token, int64_t n_top,
                             std::vector<int32_t>& order) {
  CONVEYOR_CHECK(token >= 0 && token < vocab, "logprobs asked for token ", token, " outside the vocabulary of ", vocab);
  const double log_z = log_normalizer(logits, vocab);
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - log_z); };
  TokenLogprobs out;
  out.token = token;
  out.logprob = logprob(token);
  const float chosen = logits[token];
  out.rank = 1;
  for (int64_t i = 0; i < vocab; ++i) out.rank += logits[i] > chosen ? 1 : 0;
  const int64_t n = std::min(n_top, vocab);
  if (n <= 0) return out;
  order.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < n; ++i) out.top.push_back({order[i], logprob(order[i])});
  return out;
}

void score_logit_rows(const float* logits, int64_t rows, int64_t vocab, const int32_t* targets, int64_t n_top,
                      bool full, PromptScores* out) {
  std::vector<int32_t> order;
  out->rows.reserve(out->rows.size() + static_cast<size_t>(rows));
  if (full) out->full.reserve(out->full.size() + static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    for (int64_t i = 0; i < vocab; ++i) {
      if (!std::isfinite(row[i]))
        CONVEYOR_THROW("the model produced logit ", row[i], " for token ", i, " at prompt position ",
                       out->first_pos + r, " of sequence ", out->seq_id,
                       "; non-finite logits mean the forward pass overflowed or read bad weights");
    }
    out->rows.push_back(token_logprobs(row, vocab, targets[r], n_top, order));
    if (!full) continue;
    const double log_z = log_normalizer(row, vocab);
    for (int64_t i = 0; i < vocab; ++i) out->full.push_back(static_cast<float>(row[i] - log_z));
  }
}

}  // namespace conveyor
