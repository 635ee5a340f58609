// Per-request sampling parameters with vLLM's names, ranges and defaults, read from a request body
// (OpenAI / vLLM JSON) on top of defaults that come from the config's sampling.* keys.
// Invariant: a SamplingParams that left from_json/from_config has passed validate(); the sampler and
// stop checker rely on its ranges and do not re-check them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace conveyor {

class Config;

// Temperatures below this sample greedily, as vLLM's _SAMPLING_EPS: top_k, top_p and min_p are then
// ignored and the seed plays no part.
constexpr double kGreedyTemperature = 1e-5;
// Most alternatives a request may ask for per token (vLLM's default max_logprobs).
constexpr int kMaxLogprobs = 20;

// One violated range: which parameter and the full sentence describing it.
struct SamplingViolation {
  std::string parameter;  // "top_p"
  std::string message;    // "top_p must be in (0, 1], got 1.5"
};

struct SamplingParams {
  int64_t n = 1;                  // completions per prompt; only 1 is supported for now
  double temperature = 1.0;       // >= 0, finite; < kGreedyTemperature is greedy
  double top_p = 1.0;             // (0, 1]
  int64_t top_k = 0;              // 0 or -1: off; else >= 1
  double min_p = 0.0;             // [0, 1]
  std::optional<int64_t> seed;    // none: derived from the global seed and the request index
  double repetition_penalty = 1.0;  // > 0; over prompt and output tokens
  double presence_penalty = 0.0;    // [-2, 2]; over output tokens
  double frequency_penalty = 0.0;   // [-2, 2]; over output tokens
  // 0: no limit, EOS, a stop or the context limit ends the output (vLLM's default); else >= 1.
  int64_t max_tokens = 0;
  int64_t min_tokens = 0;           // [0, max_tokens] when max_tokens is set
  std::vector<std::string> stop;    // stop strings, none empty
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  std::optional<int64_t> logprobs;  // none, or 0..kMaxLogprobs alternatives beside the chosen token
  bool skip_special_tokens = true;

  bool greedy() const { return temperature < kGreedyTemperature; }
  bool top_k_enabled() const { return top_k > 0; }

  // The first violated range, or none. validate() throws it as a conveyor::Error.
  std::optional<SamplingViolation> first_violation() const;
  void validate() const;

  // Reads an OpenAI / vLLM request body (completions or chat) over `defaults`: absent or null fields
  // keep their default, unknown fields are ignored (the body carries prompt, model, ...). A field of
  // the wrong type is an error naming it; the result is validated.
  static SamplingParams from_json(const nlohmann::json& body, const SamplingParams& defaults);
  // The request-body form of every field (from_json(to_json(), {}) gives the same parameters back).
  nlohmann::json to_json() const;

  // Defaults from the config's sampling.* keys; an invalid combination names the key and its origin.
  static SamplingParams from_config(const Config& config);
};

}  // namespace conveyor
