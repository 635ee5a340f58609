// Chat prompts as token ids: the one builder of `conveyor generate --chat` and of a batch job's chat
// requests, so the same messages give the same ids on both paths. The template is the job's choice
// (--chat-template, else the model's own, default system prompt included), rendered with the
// generation prompt and encoded by the model's tokenizer (encode_chat).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/tokenizer/chat_template.h"

namespace conveyor {

// Throws an Error saying what is missing (no template: chat.why_none; no tokenizer), which a batch job
// turns into that line's error.
std::vector<int32_t> chat_prompt_ids(const ChatTemplateChoice& chat, const Tokenizer* tok,
                                     const std::vector<ChatMessage>& messages);

// --chat: the --system message (when given), then `user` as one user turn, with the template that
// choose_chat_template picks from --chat-template (`template_name`, "" for none) and the model's text.
std::vector<int32_t> single_turn_chat_ids(const std::string& template_name, const std::string& model_template,
                                          const Tokenizer* tok, const std::optional<std::string>& system,
                                          const std::string& user);

}  // namespace conveyor
