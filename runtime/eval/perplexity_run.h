// One perplexity evaluation: the text's tokens through run_perplexity_chunks, the NLL statistics,
// and with a KL-divergence base either saving this run's log-probabilities (--kl-divergence-base
// alone) or comparing against them (with --kl-divergence): mean KLD +/- its standard error and the
// share of positions whose most likely token is the same.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/eval/perplexity.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

// The text tokenized once as the protocol wants it; bos >= 0 when the tokenizer adds a BOS.
struct PerplexityText {
  std::vector<int32_t> tokens;
  int32_t bos = -1;
};
PerplexityText tokenize_for_perplexity(const Tokenizer& tok, const std::string& text);

struct PerplexityOptions {
  int32_t ctx = 512;
  int64_t max_chunks = -1;        // --chunks; < 0: all
  std::string kld_base;           // --kl-divergence-base FILE ("" none)
  bool kld_compare = false;       // --kl-divergence: compare against kld_base instead of writing it
  std::string model;              // named in the base file and the JSON
  int window = 2;                 // chunks in flight
  std::function<void(int64_t chunk, double running_ppl)> on_chunk;  // after each chunk, in order
};

struct PerplexityReport {
  PerplexityChunking chunking;
  int64_t n_tokens = 0;
  std::vector<double> running_ppl;   // after chunk 1, 2, ...
  std::vector<double> chunk_mean_nll;
  NllStats nll;
  bool has_kld = false;
  MeanStats kld;
  int64_t same_top = 0;              // positions whose top token equals the base's
  double seconds = 0;

  double same_top_share() const { return kld.count() ? static_cast<double>(same_top) / kld.count() : 0.0; }
  // The fields docs/perplexity.md lists.
  nlohmann::json to_json() const;
  // "Final estimate: PPL = 29.2898 +/- 0.31415" (and the KLD lines when compared).
  std::string summary() const;
};

PerplexityReport evaluate_perplexity(Generator& gen, const PerplexityText& text, int64_t vocab,
                                     const PerplexityOptions& opt);

}  // namespace conveyor
