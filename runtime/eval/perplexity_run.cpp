// One perplexity evaluation (see perplexity_run.h).
#include "runtime/eval/perplexity_run.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/eval/logprob_file.h"

namespace conveyor {

PerplexityText tokenize_for_perplexity(const Tokenizer& tok, const std::string& text) {
  PerplexityText t;
  t.tokens = tok.encode(text, /*add_bos=*/true);
  const std::vector<int32_t> plain = tok.encode(text, /*add_bos=*/false);
  const int32_t bos = tok.bos_id();
  if (bos >= 0 && t.tokens.size() > plain.size() && t.tokens.front() == bos) t.bos = bos;
  return t;
}

namespace {

// The base file of a comparison, checked against this run's protocol and tokens.
std::unique_ptr<LogprobFileReader> open_base(const PerplexityOptions& opt, const PerplexityChunking& c,
                                             const std::vector<int32_t>& tokens, int64_t vocab) {
  auto reader = std::make_unique<LogprobFileReader>(opt.kld_base);
  const LogprobFileHeader& h = reader->header();
  CONVEYOR_CHECK(h.vocab == vocab && h.ctx == static_cast<uint32_t>(c.ctx) &&
                     h.first_scored == static_cast<uint32_t>(c.first_scored()),
                 opt.kld_base, " was made with vocab ", h.vocab, " and --ctx-size ", h.ctx, " (model ", h.model,
                 "); this run has vocab ", vocab, " and --ctx-size ", c.ctx);
  CONVEYOR_CHECK(h.n_chunks >= c.n_chunks, opt.kld_base, " holds ", h.n_chunks, " chunks, this run scores ", c.n_chunks,
                 "; pass --chunks ", h.n_chunks, " or remake the base");
  for (int64_t i = 0; i < c.n_chunks; ++i) {
    const std::vector<int32_t> mine = c.chunk(tokens, i);
    CONVEYOR_CHECK(std::equal(mine.begin(), mine.end(), reader->tokens().begin() + i * c.ctx), opt.kld_base,
                   ": chunk ", i + 1, " holds other tokens than this run's; compare runs of the same text and tokenizer");
  }
  return reader;
}

std::unique_ptr<LogprobFileWriter> create_base(const PerplexityOptions& opt, const PerplexityChunking& c,
                                               const std::vector<int32_t>& tokens, int64_t vocab) {
  LogprobFileHeader h;
  h.vocab = static_cast<uint32_t>(vocab);
  h.ctx = static_cast<uint32_t>(c.ctx);
  h.n_chunks = static_cast<uint32_t>(c.n_chunks);
  h.scored_per_chunk = static_cast<uint32_t>(c.scored_per_chunk());
  h.first_scored = static_cast<uint32_t>(c.first_scored());
  h.bos = c.bos;
  h.model = opt.model;
  std::vector<int32_t> all;
  for (int64_t i = 0; i < c.n_chunks; ++i) {
    const std::vector<int32_t> chunk = c.chunk(tokens, i);
    all.insert(all.end(), chunk.begin(), chunk.end());
  }
  return std::make_unique<LogprobFileWriter>(opt.kld_base, h, all);
}

}  // namespace

PerplexityReport evaluate_perplexity(Generator& gen, const PerplexityText& text, int64_t vocab,
                                     const PerplexityOptions& opt) {
  CONVEYOR_CHECK(!opt.kld_compare || !opt.kld_base.empty(), "--kl-divergence needs --kl-divergence-base FILE (made by "
                                                            "an earlier run with --kl-divergence-base alone)");
  PerplexityReport rep;
  rep.n_tokens = static_cast<int64_t>(text.tokens.size());
  rep.chunking = make_chunking(rep.n_tokens, opt.ctx, text.bos, opt.max_chunks);
  const PerplexityChunking& c = rep.chunking;
  std::unique_ptr<LogprobFileReader> base;
  std::unique_ptr<LogprobFileWriter> out;
  if (opt.kld_compare) base = open_base(opt, c, text.tokens, vocab);
  else if (!opt.kld_base.empty()) out = create_base(opt, c, text.tokens, vocab);
  rep.has_kld = base != nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  run_perplexity_chunks(gen, text.tokens, c, !opt.kld_base.empty(), opt.window, [&](const ScoredChunk& sc) {
    NllStats chunk;
    for (const TokenLogprobs& lp : sc.output->prompt_logprobs) {
      rep.nll.add(-static_cast<double>(lp.logprob));
      chunk.add(-static_cast<double>(lp.logprob));
    }
    rep.chunk_mean_nll.push_back(chunk.mean());
    rep.running_ppl.push_back(rep.nll.ppl());
    if (out) out->write_chunk(sc.output->prompt_full);
    if (base) {
      const std::vector<float>& b = base->read_chunk();
      for (int32_t r = 0; r < c.scored_per_chunk(); ++r) {
        const float* bp = b.data() + static_cast<size_t>(r) * vocab;
        const float* rp = sc.output->prompt_full.data() + static_cast<size_t>(r) * vocab;
        rep.kld.add(kl_divergence(bp, rp, vocab));
        rep.same_top += top_token(bp, vocab) == top_token(rp, vocab) ? 1 : 0;
      }
    }
    if (opt.on_chunk) opt.on_chunk(sc.index, rep.running_ppl.back());
  });
  if (out) out->close();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

nlohmann::json PerplexityReport::to_json() const {
  nlohmann::json j = {{"ctx_size", chunking.ctx},
                      {"n_tokens", n_tokens},
                      {"adds_bos", chunking.bos >= 0},
                      {"n_chunks", chunking.n_chunks},
                      {"scored_per_chunk", chunking.scored_per_chunk()},
                      {"scored_tokens", nll.count()},
                      {"running_ppl", running_ppl},
                      {"chunk_mean_nll", chunk_mean_nll},
                      {"mean_nll", nll.mean()},
                      {"ppl", nll.ppl()},
                      {"ppl_error", nll.ppl_error()},
                      {"seconds", seconds}};
  if (has_kld) {
    j["kld"] = {{"mean", kld.mean()}, {"error", kld.stderr_of_mean()}, {"positions", kld.count()},
                {"same_top_share", same_top_share()}};
  }
  return j;
}

std::string PerplexityReport::summary() const {
  char line[256];
  std::snprintf(line, sizeof line, "Final estimate: PPL = %.4f +/- %.5f\n", nll.ppl(), nll.ppl_error());
  std::string s = line;
  if (has_kld) {
    std::snprintf(line, sizeof line, "Mean KLD: %.6f +/- %.6f\nSame top token: %.3f%% of %lld positions\n", kld.mean(),
                  kld.stderr_of_mean(), 100.0 * same_top_share(), static_cast<long long>(kld.count()));
    s += line;
  }
  return s;
}

}  // namespace conveyor
