// CPU reference sampler (see sampler.h). Plain loops over the vocabulary; sums of probabilities in
// double so the CPU result is the spec the CUDA sampler is compared with. A removed token is -inf,
// and every stage keeps at least the most likely remaining token, so a sample always exists.
#include "runtime/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

constexpr float kRemoved = -std::numeric_limits<float>::infinity();

// Orders token ids by descending logit, lower id first on ties: the one order every stage uses.
struct ByLogitDesc {
  const float* x;
  bool operator()(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
};

float max_logit(const std::vector<float>& logits) {
  float m = kRemoved;
  for (float v : logits) m = std::max(m, v);
  return m;
}

// The per-(seed, step) part of the key, hoisted out of the per-token loop.
uint64_t step_key(uint64_t seed, uint64_t step) { return mix64(mix64(seed) ^ step); }

double uniform_from_key(uint64_t key, uint64_t token) {
  uint64_t bits = mix64(key ^ token);
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

void check_token_range(const char* what, int32_t id, int64_t vocab) {
  if (id < 0 || id >= vocab) {
    CONVEYOR_THROW(what, " token id ", id, " is outside the vocabulary [0, ", vocab,
                   "); check the request's token ids against the model");
  }
}

}  // namespace

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double sampling_uniform(uint64_t seed, uint64_t step, uint64_t token) {
  return uniform_from_key(step_key(seed, step), token);
}

double sampling_gumbel(uint64_t seed, uint64_t step, uint64_t token) {
  return -std::log(-std::log(sampling_uniform(seed, step, token)));
}

uint64_t request_seed(const SamplingParams& params, uint64_t global_seed, uint64_t request_index) {
  if (params.seed) return static_cast<uint64_t>(*params.seed);
  // Mixed twice so that neighbouring (global seed, index) pairs give unrelated streams.
  return mix64(mix64(global_seed) ^ mix64(request_index ^ 0x5DEECE66Dull));
}

void apply_penalties(std::vector<float>& logits, const std::vector<int32_t>& prompt_ids,
                     const std::vector<int32_t>& output_ids, const SamplingParams& params) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (params.repetition_penalty != 1.0) {
    std::vector<int32_t> seen(prompt_ids);
    seen.insert(seen.end(), output_ids.begin(), output_ids.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    const float r = static_cast<float>(params.repetition_penalty);
    for (int32_t id : seen) {
      check_token_range("prompt or output", id, vocab);
      float& x = logits[id];
      x = x > 0.f ? x / r : x * r;
    }
  }
  if (params.frequency_penalty == 0.0 && params.presence_penalty == 0.0) return;
  std::vector<int32_t> out(output_ids);
  std::sort(out.begin(), out.end());
  const float freq = static_cast<float>(params.frequency_penalty);
  const float pres = static_cast<float>(params.presence_penalty);
  for (size_t i = 0; i < out.size();) {
    size_t j = i;
    while (j < out.size() && out[j] == out[i]) ++j;
    check_token_range("output", out[i], vocab);
    float& x = logits[out[i]];
    x -= freq * static_cast<float>(j - i);
    x -= pres;
    i = j;
  }
}

void apply_min_tokens_mask(std::vector<float>& logits, size_t num_outputs, const std::vector<int32_t>& eos_ids,
                           const SamplingParams& params) {
  if (num_outputs >= static_cast<size_t>(params.min_tokens)) return;
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (!params.ignore_eos) {
    for (int32_t id : eos_ids) {
      check_token_range("EOS", id, vocab);
      logits[id] = kRemoved;
    }
  }
  for (int32_t id : params.stop_token_ids) {
    check_token_range("stop_token_ids", id, vocab);
    logits[id] = kRemoved;
  }
}

void apply_temperature(std::vector<float>& logits, double temperature) {
  const float t = static_cast<float>(temperature);
  for (float& x : logits) x /= t;
}

void apply_top_k(std::vector<float>& logits, int64_t k) {
  if (k <= 0 || k >= static_cast<int64_t>(logits.size())) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::nth_element(ids.begin(), ids.begin() + k, ids.end(), ByLogitDesc{logits.data()});
  for (size_t i = static_cast<size_t>(k); i < ids.size(); ++i) logits[ids[i]] = kRemoved;
}

void apply_top_p(std::vector<float>& logits, double p) {
  if (p >= 1.0) return;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kRemoved) ids.push_back(static_cast<int32_t>(i));
  }
  if (ids.empty()) return;
  const double m = max_logit(logits);
  double total = 0.0;  // in token-id order
  for (int32_t id : ids) total += std::exp(logits[id] - m);
  const double budget = p * total;
  // Sorting a 128k vocabulary for a nucleus of a few hundred tokens is the slow part: select a
  // growing head (each nth_element is linear) until it holds the budget, then sort only the head.
  const ByLogitDesc order{logits.data()};
  size_t head = std::min<size_t>(64, ids.size());
  while (true) {
    std::nth_element(ids.begin(), ids.begin() + (head - 1), ids.end(), order);
    double mass = 0.0;
    for (size_t i = 0; i < head; ++i) mass += std::exp(logits[ids[i]] - m);
    if (mass >= budget || head == ids.size()) break;
    head = std::min(ids.size(), head * 4);
  }
  std::sort(ids.begin(), ids.begin() + head, order);
  double before = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    // Past the head every token is removed: the head alone already reaches the budget.
    if (i >= head || before >= budget) {
      logits[ids[i]] = kRemoved;
    } else {
      before += std::exp(logits[ids[i]] - m);
    }
  }
}

void apply_min_p(std::vector<float>& logits, double min_p) {
  if (min_p <= 0.0) return;
  const double m = max_logit(logits);
  if (m == kRemoved) return;
  for (float& x : logits) {
    // p_i / p_max = exp(x_i - x_max): the normalisation cancels.
    if (x != kRemoved && std::exp(static_cast<double>(x) - m) < min_p) x = kRemoved;
  }
}

int32_t argmax_token(const std::vector<float>& logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kRemoved) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  CONVEYOR_CHECK(best >= 0, "every token of the vocabulary (", logits.size(),
                 ") was removed before sampling; min_tokens masks EOS and stop_token_ids, is that all of it?");
  return best;
}

Sampler::Sampler(std::vector<int32_t> eos_ids) : eos_ids_(std::move(eos_ids)) {}

SampleResult Sampler::sample(const float* logits, int64_t vocab, const SequenceView& seq,
                             const SamplingParams& params) {
  CONVEYOR_CHECK(vocab > 0, "sampler called with an empty vocabulary");
  for (int32_t id : params.stop_token_ids) check_token_range("stop_token_ids", id, vocab);
  work_.assign(logits, logits + vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(work_[i]) || work_[i] == std::numeric_limits<float>::infinity()) {
      CONVEYOR_THROW("the model produced logit ", work_[i], " for token ", i,
                     "; non-finite logits mean the forward pass overflowed or read bad weights");
    }
  }
  const bool penalised =
      params.repetition_penalty != 1.0 || params.frequency_penalty != 0.0 || params.presence_penalty != 0.0;
  if (penalised) apply_penalties(work_, seq.prompt_ids, seq.output_ids, params);
  apply_min_tokens_mask(work_, seq.output_ids.size(), eos_ids_, params);

  SampleResult result;
  if (params.greedy()) {
    result.token = argmax_token(work_);
  } else {
    apply_temperature(work_, params.temperature);
    apply_top_k(work_, params.top_k);
    apply_top_p(work_, params.top_p);
    apply_min_p(work_, params.min_p);
    // Gumbel-max: argmax(x + g) is a draw from softmax(x); each token's noise has its own key, so
    // the draw does not depend on the order in which a GPU reduction visits the vocabulary.
    const uint64_t key = step_key(seq.seed, seq.output_ids.size());
    double best = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < vocab; ++i) {
      if (work_[i] == kRemoved) continue;
      double score = work_[i] - std::log(-std::log(uniform_from_key(key, static_cast<uint64_t>(i))));
      if (score > best) best = score, result.token = static_cast<int32_t>(i);
    }
    CONVEYOR_CHECK(result.token >= 0, "every token of the vocabulary (", vocab, ") was removed before sampling");
  }
  if (params.logprobs) fill_logprobs(logits, vocab, *params.logprobs, &result);
  return result;
}

void Sampler::fill_logprobs(const float* logits, int64_t vocab, int64_t n_top, SampleResult* out) {
  TokenLogprobs lp = token_logprobs(logits, vocab, out->token, n_top, order_);
  out->has_logprobs = true;
  out->logprob = lp.logprob;
  out->rank = lp.rank;
  out->top = std::move(lp.top);
}

}  // namespace conveyor
