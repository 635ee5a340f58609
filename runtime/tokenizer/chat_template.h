// Built-in chat templates that reproduce, character for character, what HF transformers'
// apply_chat_template renders for ChatML (SmolLM2, Qwen2), Llama-3 and Llama-2 ([INST] with <<SYS>>).
// A template is chosen by name or detected from a model's Jinja chat_template string by its markers;
// a Jinja engine is deliberately not embedded. The rendered text contains the BOS text when the
// template does (Llama-2, Llama-3): encode it with add_bos=false and parse_special=true.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};


enum class ChatTemplateKind { kChatML, kLlama3, kLlama2 };

class ChatTemplate {
 public:
  // "chatml", "llama3" or "llama2" (alias "mistral" is not accepted: Mistral's own template differs).
  // An unknown name throws, listing the known ones.
  static ChatTemplate by_name(const std::string& name);
  // Detects the family of a Jinja chat_template (tokenizer_config.json / GGUF tokenizer.chat_template)
  // by its markers; none when it is not one we reproduce. A ChatML template that writes a fixed system
  // message when the conversation has none (SmolLM2, Qwen2) keeps that message.
  static std::optional<ChatTemplate> detect(const std::string& jinja);
  static std::vector<std::string> names();

  ChatTemplateKind kind() const { return kind_; }
  const std::string& name() const;
  const std::string& default_system() const { return default_system_; }

  // The prompt text for `messages`, ending with the assistant header when add_generation_prompt.
  // `bos` / `eos` are the tokenizer's BOS / EOS token text ("<s>", "</s>", "<|begin_of_text|>").
  // Throws conveyor::Error for conversations the template rejects (Llama-2: roles must alternate
  // user/assistant after an optional system message), to become a per-line error.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const std::string& bos,
                     const std::string& eos) const;

 private:
  ChatTemplate(ChatTemplateKind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}
  std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatTemplateKind kind_;
  std::string default_system_;  // ChatML only; "" when none
};

// The template a job uses: the --chat-template name when given, else the model's metadata template.
// `why_none` says what to do when neither yields one; chat requests then fail per line with it.
struct ChatTemplateChoice {
  std::optional<ChatTemplate> chosen;
  std::string why_none;
};
ChatTemplateChoice choose_chat_template(const std::string& name, const std::string& metadata_template);

// The model's own chat template text: GGUF tokenizer.chat_template, or tokenizer_config.json's
// chat_template in an HF directory; "" when there is none (or the JSON is unreadable).
std::string model_chat_template(const std::string& model_path);

// A conversation as prompt ids: rendered with the generation prompt, the tokenizer's BOS / first EOS
// token text filled in, and encoded with add_bos=false and parse_special=true (the text has the BOS
// when the template wants one).
std::vector<int32_t> encode_chat(const ChatTemplate& chat, const Tokenizer& tok, const std::vector<ChatMessage>& messages);

}  // namespace conveyor
