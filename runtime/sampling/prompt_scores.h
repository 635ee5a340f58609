// Log-probabilities of given tokens under rows of fp32 logits: what a chosen token's logprobs
// (Sampler), a prompt's prompt_logprobs and perplexity all read. A row's log-softmax is taken in
// double (max-shifted), rank is 1 + the number of strictly larger logits, and the top list is
// sorted by logprob, lower id first on ties, so every consumer agrees on the same numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace conveyor {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.f;
};

// One position's logprobs: the token that came (or was chosen), its logprob and rank, the top list.
struct TokenLogprobs {
  int32_t token = -1;
  float logprob = 0.f;
  int64_t rank = 0;
  std::vector<TokenLogprob> top;
};

// log(sum(exp(logits))) of one row.
double log_normalizer(const float* logits, int64_t vocab);

// Logprobs of `token` in one row of logits with its n_top most likely tokens; `order` is scratch.
TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int32_t token, int64_t n_top,
                             std::vector<int32_t>& order);

// What the sampling stage computes for the prompt positions of one sequence in a step: rows of
// logits, each scored against the token that follows its position.
struct PromptScores {
  int64_t seq_id = 0;
  int32_t first_pos = 0;             // position of the first row; it predicts prompt token first_pos + 1
  std::vector<TokenLogprobs> rows;
  std::vector<float> full;           // rows.size() x vocab log-softmax when asked for, else empty
};

// Scores `rows` rows of logits [rows, vocab]: row r against targets[r], with n_top alternatives,
// and the whole log-softmax of every row when `full`. Throws on a non-finite logit (a broken
// forward pass must not pass as a perplexity).
void score_logit_rows(const float* logits, int64_t rows, int64_t vocab, const int32_t* targets, int64_t n_top,
                      bool full, PromptScores* out);

}  // namespace conveyor
