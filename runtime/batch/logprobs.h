// OpenAI-shaped logprobs of one finished request, for batch results. Token text is the tokenizer's
// decode of the single id (byte-level / SentencePiece markers turned back into bytes), made valid
// UTF-8 with utf8_lossy for the JSON strings; chat's "bytes" keep the raw bytes of the token.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "runtime/batch/input.h"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

// The logprobs object of a choice: completions {tokens, token_logprobs, top_logprobs, text_offset}
// (text_offset counts the raw bytes of earlier tokens); chat {content: [{token, logprob, bytes,
// top_logprobs}]}. Null without logprobs. tok null: tokens are named by their decimal id.
nlohmann::json openai_logprobs(const CompletionOutput& out, Endpoint endpoint, const Tokenizer* tok);

// One token's text as logprobs name it (raw bytes; tok null: its decimal id).
std::string token_text(const Tokenizer* tok, int32_t id);

}  // namespace conveyor
