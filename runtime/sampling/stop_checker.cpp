// Stop conditions of one sequence (see stop_checker.h), in vLLM's order: nothing but the length
// limits is checked while fewer than min_tokens outputs exist; then EOS, stop_token_ids, stop
// strings; then the context limit and max_tokens. A stop string is searched only where it could
// touch the newly appended text, so each call costs O(new text + stop string lengths).
#include "runtime/sampling/stop_checker.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

bool contains(const std::vector<int32_t>& ids, int32_t token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Length of the longest suffix of `text` that is a proper prefix of `stop` (it may still grow into it).
size_t partial_match_length(const std::string& text, const std::string& stop) {
  for (size_t len = std::min(stop.size() - 1, text.size()); len > 0; --len) {
    if (text.compare(text.size() - len, len, stop, 0, len) == 0) return len;
  }
  return 0;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return nullptr;
}

FinishReason parse_finish_reason(const std::string& name) {
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kError})
    if (name == finish_reason_name(r)) return r;
  CONVEYOR_THROW("unknown finish_reason '", name, "'; expected stop, length or error");
}

StopChecker::StopChecker(const SamplingParams& params, std::vector<int32_t> eos_ids, int64_t prompt_len,
                         int64_t max_model_len)
    : params_(params), eos_ids_(std::move(eos_ids)), prompt_len_(prompt_len), max_model_len_(max_model_len) {
  for (const std::string& s : params_.stop) {
    CONVEYOR_CHECK(!s.empty(), "stop cannot contain an empty string; validate the SamplingParams first");
    max_stop_len_ = std::max(max_stop_len_, s.size());
  }
  CONVEYOR_CHECK(max_model_len_ == 0 || prompt_len_ < max_model_len_, "prompt of ", prompt_len_,
                 " tokens leaves no room for output under max_model_len ", max_model_len_);
}

bool StopChecker::is_eos(int32_t token) const { return !params_.ignore_eos && contains(eos_ids_, token); }

bool StopChecker::is_stop_token(int32_t token) const { return contains(params_.stop_token_ids, token); }

bool StopChecker::match_stop_string(size_t old_size) {
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : params_.stop) {
    // A match must include at least one new byte; earlier ones were seen (or deliberately skipped
    // under min_tokens) before.
    size_t start = old_size >= s.size() - 1 ? old_size - (s.size() - 1) : 0;
    size_t pos = text_.find(s, start);
    if (pos != std::string::npos && pos < best_pos) best_pos = pos, best = &s;
  }
  if (!best) return false;
  size_t cut = params_.include_stop_str_in_output ? best_pos + best->size() : best_pos;
  CONVEYOR_CHECK(cut >= streamed_, "internal: stop string at byte ", best_pos, " cuts text already streamed (",
                 streamed_, " bytes)");
  text_.resize(cut);
  stop_string_ = *best;
  return true;
}

FinishReason StopChecker::append(int32_t token, const std::string& new_text) {
  CONVEYOR_CHECK(!finished(), "StopChecker::append called after the sequence finished with reason '",
                 finish_reason_name(reason_), "'");
  const size_t old_size = text_.size();
  text_ += new_text;
  ++num_tokens_;
  if (num_tokens_ >= params_.min_tokens) {
    if (is_eos(token) || is_stop_token(token)) {
      // The stop token's own text (usually empty or a special token) is not output unless asked.
      if (!params_.include_stop_str_in_output) text_.resize(old_size);
      if (!is_eos(token)) stop_token_ = token;
      reason_ = FinishReason::kStop;
      return reason_;
    }
    if (match_stop_string(old_size)) {
      reason_ = FinishReason::kStop;
      return reason_;
    }
  }
  // Prompt + output reaching max_model_len leaves no position for another token's KV entry.
  if (max_model_len_ > 0 && prompt_len_ + num_tokens_ >= max_model_len_) reason_ = FinishReason::kLength;
  if (params_.max_tokens > 0 && num_tokens_ >= params_.max_tokens) reason_ = FinishReason::kLength;
  return reason_;
}

std::string StopChecker::take_streamable() {
  size_t end = text_.size();
  if (!finished()) {
    size_t hold = 0;
    for (const std::string& s : params_.stop) hold = std::max(hold, partial_match_length(text_, s));
    end -= hold;
    while (end > streamed_ && end < text_.size() && is_utf8_continuation(text_[end])) --end;
  }
  if (end <= streamed_) return {};
  std::string out = text_.substr(streamed_, end - streamed_);
  streamed_ = end;
  return out;
}

}  // namespace conveyor
