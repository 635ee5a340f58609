// Decides when one sequence is finished, vLLM-style: EOS (unless ignore_eos), stop_token_ids, stop
// strings (matched across token boundaries in the decoded text), max_tokens and the context limit.
// It owns the sequence's output text: text fed in chunks by a streaming detokenizer, cut before a
// matched stop string (or after it with include_stop_str_in_output). Invariant: text handed out by
// take_streamable() is never cut later, because the tail that could start a stop string is held back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampling/params.h"

namespace conveyor {

// Why a sequence ended. StopChecker gives kStop or kLength; kError is the engine's, for a request that
// failed (e.g. the scheduler refused it) and so has no OpenAI finish_reason of its own.
enum class FinishReason { kNone, kStop, kLength, kError };
// The text of a reason: OpenAI's "stop" / "length", "error", or nullptr for kNone (still running).
const char* finish_reason_name(FinishReason r);
// The inverse of finish_reason_name for the three finished reasons; throws on any other text.
FinishReason parse_finish_reason(const std::string& name);

class StopChecker {
 public:
  // eos_ids: the model's EOS tokens. prompt_len and max_model_len (0: no limit) cap the sequence:
  // it finishes with "length" once prompt + output tokens reach max_model_len.
  StopChecker(const SamplingParams& params, std::vector<int32_t> eos_ids, int64_t prompt_len = 0,
              int64_t max_model_len = 0);

  // One generated token and the text the detokenizer produced for it (possibly empty, e.g. while a
  // UTF-8 character is incomplete). Returns the finish reason after it; calling again after a
  // finish is an error.
  FinishReason append(int32_t token, const std::string& new_text);

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  // vLLM's stop_reason: the matched stop string or stop token id; empty for EOS, length or running.
  const std::optional<std::string>& stop_string() const { return stop_string_; }
  const std::optional<int32_t>& stop_token() const { return stop_token_; }

  int64_t num_tokens() const { return num_tokens_; }
  // All output text so far (after truncation once finished).
  const std::string& text() const { return text_; }
  // Output text not handed out before that can no longer change: everything once finished, else
  // all but the longest tail that could still begin a stop string (never splitting a UTF-8 character).
  std::string take_streamable();

 private:
  bool is_eos(int32_t token) const;
  bool is_stop_token(int32_t token) const;
  // Finds the earliest stop string touching the text appended since `old_size`; cuts the text.
  bool match_stop_string(size_t old_size);

  SamplingParams params_;
  std::vector<int32_t> eos_ids_;
  int64_t prompt_len_;
  int64_t max_model_len_;
  size_t max_stop_len_ = 0;

  int64_t num_tokens_ = 0;
  std::string text_;
  size_t streamed_ = 0;
  FinishReason reason_ = FinishReason::kNone;
  std::optional<std::string> stop_string_;
  std::optional<int32_t> stop_token_;
};

}  // namespace conveyor
