// Perplexity protocol and statistics (see perplexity.h).
#include "runtime/eval/perplexity.h"

#include <cmath>
#include <map>
#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

namespace {
double stderr_from(double sum, double sum2, int64_t n) {
  if (n < 2) return 0.0;
  const double mean = sum / static_cast<double>(n);
  const double var = sum2 / static_cast<double>(n) - mean * mean;
  return var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
}
}  // namespace

void NllStats::add(double nll) {
  sum_ += nll;
  sum2_ += nll * nll;
  ++n_;
}
double NllStats::stderr_of_mean() const { return stderr_from(sum_, sum2_, n_); }
double NllStats::ppl() const { return std::exp(mean()); }

void MeanStats::add(double v) {
  sum_ += v;
  sum2_ += v * v;
  ++n_;
}
double MeanStats::stderr_of_mean() const { return stderr_from(sum_, sum2_, n_); }

double kl_divergence(const float* base_logp, const float* run_logp, int64_t vocab) {
  double m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(base_logp[i]));
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += std::exp(base_logp[i] - m);
  const double log_z = m + std::log(z);
  double kl = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double lb = base_logp[i] - log_z;
    kl += std::exp(lb) * (lb - run_logp[i]);
  }
  return kl;
}

int32_t top_token(const float* logp, int64_t vocab) {
  int32_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (logp[i] > logp[best]) best = static_cast<int32_t>(i);
  return best;
}

std::vector<int32_t> PerplexityChunking::chunk(const std::vector<int32_t>& tokens, int64_t i) const {
  const auto begin = tokens.begin() + i * ctx;
  std::vector<int32_t> out(begin, begin + ctx);
  if (bos >= 0) out[0] = bos;
  return out;
}

PerplexityChunking make_chunking(int64_t n_tokens, int32_t ctx, int32_t bos, int64_t max_chunks) {
  CONVEYOR_CHECK(ctx >= 4, "--ctx-size must be at least 4 (half of each chunk is context), got ", ctx);
  CONVEYOR_CHECK(n_tokens >= ctx, "the text has ", n_tokens, " tokens, fewer than one chunk of --ctx-size ", ctx,
                 "; give a longer text or a smaller --ctx-size");
  PerplexityChunking c;
  c.ctx = ctx;
  c.bos = bos;
  c.n_chunks = n_tokens / ctx;
  if (max_chunks >= 0) c.n_chunks = std::min(c.n_chunks, max_chunks);
  CONVEYOR_CHECK(c.n_chunks > 0, "--chunks 0 leaves nothing to score");
  return c;
}

void run_perplexity_chunks(Generator& gen, const std::vector<int32_t>& tokens, const PerplexityChunking& c, bool full,
                           int window, const ChunkCallback& on_chunk) {
  std::map<int64_t, std::vector<int32_t>> pending;  // tokens of the chunks submitted, not yet consumed
  std::map<int64_t, CompletionOutput> finished;
  int64_t next_submit = 0, next_consume = 0;
  while (next_consume < c.n_chunks) {
    while (next_submit < c.n_chunks && next_submit - next_consume < std::max(1, window)) {
      Request req;
      req.id = next_submit;
      req.index = static_cast<uint64_t>(next_submit);
      req.prompt_ids = c.chunk(tokens, next_submit);
      req.params.max_tokens = 1;
      req.params.temperature = 0;
      req.params.ignore_eos = true;
      req.scoring = PromptScoring{true, 0, full, c.first_scored()};
      req.label = "perplexity chunk " + std::to_string(next_submit + 1);
      pending[next_submit] = req.prompt_ids;
      gen.add_request(std::move(req));
      ++next_submit;
    }
    for (CompletionOutput& out : gen.step()) {
      CONVEYOR_CHECK(out.finish_reason != FinishReason::kError, "perplexity chunk ", out.request_id + 1, " failed: ",
                     out.error);
      finished.emplace(out.request_id, std::move(out));
    }
    for (auto it = finished.find(next_consume); it != finished.end(); it = finished.find(next_consume)) {
      CONVEYOR_CHECK(static_cast<int32_t>(it->second.prompt_logprobs.size()) == c.scored_per_chunk(), "perplexity chunk ",
                     next_consume + 1, " came back with ", it->second.prompt_logprobs.size(), " scored positions, expected ",
                     c.scored_per_chunk());
      on_chunk(ScoredChunk{next_consume, &pending.at(next_consume), &it->second});
      pending.erase(next_consume);
      finished.erase(it);
      ++next_consume;
    }
  }
}

}  // namespace conveyor
