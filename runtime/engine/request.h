// A generation request as the engine receives it: token ids of the prompt, sampling parameters and
// its place in the input (which seeds its sampler when it brings no seed of its own).
// Invariant: a Request that passed validate_request() has a non-empty prompt of in-vocabulary ids that
// leaves room for at least max(1, min_tokens) generated tokens under max_model_len.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/prompt_scoring.h"
#include "runtime/sampling/params.h"

namespace conveyor {

struct Request {
  int64_t id = 0;            // unique among the requests an engine holds; outputs carry it back
  uint64_t index = 0;        // arrival order / line in the input; seeds the sampler when params.seed is unset
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  std::string label;         // how messages name it ("request 7", "line 12 (custom_id abc)")
  PromptScoring scoring;     // prompt_logprobs / perplexity: prompt positions the last stage scores
};

// Throws conveyor::Error naming the request and what to change: an empty prompt, a token id outside
// [0, vocab), a prompt that leaves no room (prompt + max(1, min_tokens) > max_model_len), or a
// max_tokens the context cannot hold (prompt + max_tokens > max_model_len; never clamped).
// max_model_len 0 means no limit. params must already be valid (SamplingParams::validate).
void validate_request(const Request& request, int64_t vocab, int64_t max_model_len);

// The longest the sequence can become: prompt + max_tokens, capped by max_model_len (0: no cap); with
// no max_tokens, max_model_len itself (prompt + 1 when neither limits it).
int64_t max_sequence_len(const Request& request, int64_t max_model_len);

// Parses "1, 2,3" into token ids; `origin` names the flag or field in messages.
std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& origin);

}  // namespace conveyor
