// prompt_logprobs in batch requests and results (see prompt_logprobs.h).
#include "runtime/batch/prompt_logprobs.h"

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/batch/logprobs.h"
#include "runtime/core/error.h"
#include "runtime/sampling/params.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

std::optional<int64_t> read_prompt_logprobs(const nlohmann::json& body) {
  auto it = body.find("prompt_logprobs");
  if (it == body.end() || it->is_null()) return std::nullopt;
  CONVEYOR_CHECK(it->is_number_integer(), "request field 'prompt_logprobs' must be an integer in [0, ", kMaxLogprobs,
                 "], got ", it->dump());
  const int64_t k = it->get<int64_t>();
  CONVEYOR_CHECK(k >= 0 && k <= kMaxLogprobs, "request field 'prompt_logprobs' must be in [0, ", kMaxLogprobs, "], got ", k);
  return k;
}

nlohmann::json openai_prompt_logprobs(const CompletionOutput& out, const Tokenizer* tok) {
  if (out.prompt_logprobs_first == 0) return nullptr;  // the request did not ask
  nlohmann::json list = nlohmann::json::array();
  for (int32_t i = 0; i < out.prompt_logprobs_first; ++i) list.push_back(nullptr);
  auto entry = [&](int32_t id, float logprob, int64_t rank) {
    return nlohmann::json{{"logprob", logprob}, {"rank", rank}, {"decoded_token", utf8_lossy(token_text(tok, id))}};
  };
  for (const TokenLogprobs& lp : out.prompt_logprobs) {
    nlohmann::json pos = nlohmann::json::object();
    pos[std::to_string(lp.token)] = entry(lp.token, lp.logprob, lp.rank);
    for (size_t r = 0; r < lp.top.size(); ++r) {
      const TokenLogprob& t = lp.top[r];
      pos[std::to_string(t.token)] = entry(t.token, t.logprob, static_cast<int64_t>(r) + 1);
    }
    list.push_back(std::move(pos));
  }
  return list;
}

}  // namespace conveyor
