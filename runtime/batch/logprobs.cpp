// openai_logprobs (see logprobs.h): one loop per endpoint shape, since the two share only the token
// text and its lossy repair.
#include "runtime/batch/logprobs.h"

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/utf8.h"

namespace conveyor {

std::string token_text(const Tokenizer* tok, int32_t id) { return tok ? tok->decode({id}, false) : std::to_string(id); }

namespace {

using nlohmann::json;

json token_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json chat_logprobs(const CompletionOutput& out, const Tokenizer* tok) {
  json content = json::array();
  for (const TokenLogprobs& lp : out.logprobs) {
    const std::string t = token_text(tok, lp.token);
    json top = json::array();
    for (const TokenLogprob& a : lp.top) {
      const std::string at = token_text(tok, a.token);
      top.push_back({{"token", utf8_lossy(at)}, {"logprob", a.logprob}, {"bytes", token_bytes(at)}});
    }
    content.push_back({{"token", utf8_lossy(t)}, {"logprob", lp.logprob}, {"bytes", token_bytes(t)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const CompletionOutput& out, const Tokenizer* tok) {
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  int64_t offset = 0;
  for (const TokenLogprobs& lp : out.logprobs) {
    const std::string t = token_text(tok, lp.token);
    tokens.push_back(utf8_lossy(t));
    values.push_back(lp.logprob);
    json top = json::object();
    for (const TokenLogprob& a : lp.top) top[utf8_lossy(token_text(tok, a.token))] = a.logprob;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

}  // namespace

json openai_logprobs(const CompletionOutput& out, Endpoint endpoint, const Tokenizer* tok) {
  if (out.logprobs.empty()) return nullptr;
  return endpoint == Endpoint::kChatCompletions ? chat_logprobs(out, tok) : completion_logprobs(out, tok);
}

}  // namespace conveyor
