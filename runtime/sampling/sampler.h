// CPU reference sampler: one sequence's fp32 logits -> the next token, in vLLM's order
//   penalties (+ min_tokens mask) -> temperature -> top-k -> top-p -> min-p -> sample.
// Randomness is counter-based: the draw for a token depends only on (seed, step, token id), where
// step is the number of output tokens so far, so results do not depend on batch composition, and
// preemption-by-recompute or the CUDA sampler reproduce them. Logprobs are vLLM's default
// "raw_logprobs": log_softmax of the model's logits before penalties, temperature and filtering.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/sampling/params.h"
#include "runtime/sampling/prompt_scores.h"

namespace conveyor {

// --- counter-based randomness (the CUDA sampler must compute the same bits) ---------------------
// splitmix64's finaliser: a bijective mix of 64 bits.
uint64_t mix64(uint64_t x);
// A uniform double in the open interval (0, 1) for (seed, step, token):
//   bits = mix64(mix64(mix64(seed) ^ step) ^ token); u = ((bits >> 11) + 0.5) * 2^-53.
double sampling_uniform(uint64_t seed, uint64_t step, uint64_t token);
// Gumbel(0, 1) noise -log(-log(u)) for the same key; argmax(logit/T + noise) samples softmax(logit/T).
double sampling_gumbel(uint64_t seed, uint64_t step, uint64_t token);
// The seed of a request: its own `seed` when given, else one derived from the run's global seed and
// the request's index in the input, so a rerun of the same input draws the same tokens.
uint64_t request_seed(const SamplingParams& params, uint64_t global_seed, uint64_t request_index);

// --- the pipeline's stages, on a mutable copy of the logits; -inf marks a removed token -----------
// Repetition penalty over prompt and output tokens (x > 0 ? x / r : x * r, once per distinct
// token), then x -= frequency_penalty * count and x -= presence_penalty over output tokens.
void apply_penalties(std::vector<float>& logits, const std::vector<int32_t>& prompt_ids,
                     const std::vector<int32_t>& output_ids, const SamplingParams& params);
// While fewer than min_tokens outputs exist, EOS ids (unless ignore_eos) and stop_token_ids are -inf.
void apply_min_tokens_mask(std::vector<float>& logits, size_t num_outputs, const std::vector<int32_t>& eos_ids,
                           const SamplingParams& params);
void apply_temperature(std::vector<float>& logits, double temperature);
// Keeps exactly the k largest (ties broken towards the lower token id).
void apply_top_k(std::vector<float>& logits, int64_t k);
// Keeps the smallest prefix of tokens, by descending probability (ties: lower id first), whose mass
// reaches p: a token stays when the mass strictly before it is below p. The top token always stays.
void apply_top_p(std::vector<float>& logits, double p);
// Drops tokens whose probability is below min_p times the largest probability.
void apply_min_p(std::vector<float>& logits, double min_p);
// The largest logit's token, lowest id on ties.
int32_t argmax_token(const std::vector<float>& logits);

struct SampleResult {
  int32_t token = -1;
  // Set only when params.logprobs is: the chosen token's raw logprob, its rank in the raw
  // distribution (1 = most likely; 1 + the number of strictly more likely tokens) and the top
  // params.logprobs tokens by logprob (descending, lower id first on ties).
  bool has_logprobs = false;
  float logprob = 0.f;
  int64_t rank = 0;
  std::vector<TokenLogprob> top;
};

// The state of one sequence the sampler reads; nothing in it is modified.
struct SequenceView {
  const std::vector<int32_t>& prompt_ids;
  const std::vector<int32_t>& output_ids;  // its size is the step of the counter-based generator
  uint64_t seed;                           // request_seed(...)
};

class Sampler {
 public:
  // eos_ids: the model's end-of-sequence tokens (generation_config may list several).
  explicit Sampler(std::vector<int32_t> eos_ids);

  // logits: [vocab] for the sequence's next position. params must have passed validate().
  // Not thread-safe: it reuses scratch buffers; use one Sampler per thread.
  SampleResult sample(const float* logits, int64_t vocab, const SequenceView& seq, const SamplingParams& params);

  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

 private:
  void fill_logprobs(const float* logits, int64_t vocab, int64_t n_top, SampleResult* out);

  std::vector<int32_t> eos_ids_;
  std::vector<float> work_;     // processed logits
  std::vector<int32_t> order_;  // token ids, partially sorted for the top-N logprobs
};

}  // namespace conveyor
