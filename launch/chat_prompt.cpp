// Chat prompt ids (see chat_prompt.h).
#include "launch/chat_prompt.h"

#include "runtime/core/error.h"

namespace conveyor {

std::vector<int32_t> chat_prompt_ids(const ChatTemplateChoice& chat, const Tokenizer* tok,
                                     const std::vector<ChatMessage>& messages) {
  if (!chat.chosen) CONVEYOR_THROW("chat request, but no chat template: ", chat.why_none);
  if (!tok) CONVEYOR_THROW("chat request, but the model has no tokenizer");
  return encode_chat(*chat.chosen, *tok, messages);
}

std::vector<int32_t> single_turn_chat_ids(const std::string& template_name, const std::string& model_template,
                                          const Tokenizer* tok, const std::optional<std::string>& system,
                                          const std::string& user) {
  std::vector<ChatMessage> messages;
  if (system) messages.push_back({"system", *system});
  messages.push_back({"user", user});
  return chat_prompt_ids(choose_chat_template(template_name, model_template), tok, messages);
}

}  // namespace conveyor
