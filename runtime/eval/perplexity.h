// Perplexity with llama.cpp's protocol, over any Generator (one Engine on the leader of any pp x tp
// layout). The text's tokens are cut into n_chunks = floor(n_tokens / ctx) chunks [i*ctx, (i+1)*ctx),
// each run from an empty KV cache (its own request) with its first token replaced by BOS when the
// tokenizer adds one; the NLL is averaged over the tokens at positions ctx/2+1 .. ctx-1 of every
// chunk (the second half: each scored token has at least ctx/2 tokens of context). Chunks are fed a
// few at a time and consumed in order, so only the chunks in flight are held.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/engine/engine.h"

namespace conveyor {

// Running mean of per-token NLLs; PPL = exp(mean), its +/- the standard error of the mean NLL
// carried through exp (d exp(m) = exp(m) dm).
class NllStats {
 public:
  void add(double nll);
  int64_t count() const { return n_; }
  double mean() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }
  double stderr_of_mean() const;
  double ppl() const;
  double ppl_error() const { return ppl() * stderr_of_mean(); }

 private:
  double sum_ = 0, sum2_ = 0;
  int64_t n_ = 0;
};

// Mean of per-position values with the standard error of that mean (KL divergence).
class MeanStats {
 public:
  void add(double v);
  int64_t count() const { return n_; }
  double mean() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }
  double stderr_of_mean() const;

 private:
  double sum_ = 0, sum2_ = 0;
  int64_t n_ = 0;
};

// KL(base || run) of one position: both rows are log-probabilities over the vocabulary; the base is
// renormalised first (it may have been stored rounded).
double kl_divergence(const float* base_logp, const float* run_logp, int64_t vocab);
// The most likely token of a log-probability row (lowest id on ties).
int32_t top_token(const float* logp, int64_t vocab);

struct PerplexityChunking {
  int32_t ctx = 0;
  int32_t bos = -1;         // >= 0: the tokenizer adds this BOS, which replaces each chunk's first token
  int64_t n_chunks = 0;     // floor(n_tokens / ctx), capped by the caller's --chunks
  int32_t first_scored() const { return ctx / 2 + 1; }      // first prompt token whose NLL counts
  int32_t scored_per_chunk() const { return ctx - first_scored(); }
  // Tokens of chunk i of `tokens`.
  std::vector<int32_t> chunk(const std::vector<int32_t>& tokens, int64_t i) const;
};

// Throws when ctx < 4 or the text has fewer than ctx tokens; max_chunks < 0 means all.
PerplexityChunking make_chunking(int64_t n_tokens, int32_t ctx, int32_t bos, int64_t max_chunks);

// One chunk as it finishes, in chunk order: its tokens and the scored positions' logprobs (and the
// full log-softmax rows, scored_per_chunk x vocab, when asked for).
struct ScoredChunk {
  int64_t index = 0;
  const std::vector<int32_t>* tokens = nullptr;
  const CompletionOutput* output = nullptr;
};
using ChunkCallback = std::function<void(const ScoredChunk&)>;

// Runs every chunk through `gen` (at most `window` unfinished at once) with the full log-softmax of
// each scored position when `full`; calls on_chunk in chunk order. Throws when a chunk fails.
void run_perplexity_chunks(Generator& gen, const std::vector<int32_t>& tokens, const PerplexityChunking& c, bool full,
                           int window, const ChunkCallback& on_chunk);

}  // namespace conveyor
