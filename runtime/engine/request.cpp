// Request validation: every check names the request and both quantities involved, because a batch
// job reports these per input line and the user fixes the line, not the code.
#include "runtime/engine/request.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {

namespace {
std::string name_of(const Request& r) { return r.label.empty() ? "request " + std::to_string(r.id) : r.label; }
}  // namespace

void validate_request(const Request& request, int64_t vocab, int64_t max_model_len) {
  const std::string who = name_of(request);
  CONVEYOR_CHECK(!request.prompt_ids.empty(), who, ": the prompt is empty (0 tokens); give at least one token");
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    int32_t t = request.prompt_ids[i];
    CONVEYOR_CHECK(t >= 0 && t < vocab, who, ": prompt token id ", t, " at position ", i,
                   " is outside the model's vocabulary [0, ", vocab, ")");
  }
  CONVEYOR_CHECK(request.params.n == 1, who, ": n = ", request.params.n, " completions are not supported; use n = 1");
  if (max_model_len <= 0) return;
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  const int64_t room = std::max<int64_t>(1, request.params.min_tokens);
  CONVEYOR_CHECK(prompt_len + room <= max_model_len, who, ": the prompt has ", prompt_len,
                 " tokens and needs room for ", room, " generated token(s), but max_model_len is ", max_model_len,
                 "; shorten the prompt to at most ", max_model_len - room, " tokens or raise --max-model-len");
  // vLLM refuses this too: clamping would return a shorter output than asked for without a word.
  const int64_t asked = request.params.max_tokens;
  CONVEYOR_CHECK(asked == 0 || prompt_len + asked <= max_model_len, who, ": the prompt has ", prompt_len,
                 " tokens and max_tokens is ", asked, ", ", prompt_len + asked, " in all, but max_model_len is ",
                 max_model_len, "; lower max_tokens to at most ", max_model_len - prompt_len,
                 " or leave it out to generate until EOS or the context limit");
}

int64_t max_sequence_len(const Request& request, int64_t max_model_len) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (request.params.max_tokens == 0) return max_model_len > 0 ? max_model_len : prompt_len + 1;
  const int64_t len = prompt_len + request.params.max_tokens;
  return max_model_len > 0 ? std::min(len, max_model_len) : len;
}

std::vector<int32_t> parse_token_ids(const std::string& text, const std::string& origin) {
  std::vector<int32_t> ids;
  for (const std::string& raw : split(text, ',')) {
    std::string part = trim(raw);
    CONVEYOR_CHECK(!part.empty(), origin, ": empty entry in token id list '", text,
                   "'; write ids separated by commas, e.g. 1,2,3");
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    CONVEYOR_CHECK(end && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, origin, ": '", part,
                   "' is not a token id (a non-negative integer) in '", text, "'");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace conveyor
