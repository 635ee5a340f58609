// prompt_logprobs of a batch request, vLLM's sampling parameter: an integer k in [0, kMaxLogprobs]
// in the body; the result's choice then carries "prompt_logprobs", one entry per prompt token: null
// for the first (it has no context), then an object keyed by token id (as a string) holding the
// prompt token and the k most likely tokens at that position, each {logprob, rank, decoded_token}.
// Kept apart from the body parser so the two change independently.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

// The body's prompt_logprobs: none when absent or null; throws naming the field when it is not an
// integer in [0, kMaxLogprobs].
std::optional<int64_t> read_prompt_logprobs(const nlohmann::json& body);

// The choice's "prompt_logprobs" array of a finished request that asked for them (null otherwise).
nlohmann::json openai_prompt_logprobs(const CompletionOutput& out, const Tokenizer* tok);

}  // namespace conveyor
