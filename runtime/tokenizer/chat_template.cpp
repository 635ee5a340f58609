// The three chat formats written out in C++ (see chat_template.h). Whitespace handling follows the
// Jinja templates exactly: Llama-3 trims each content (Jinja `| trim`), Llama-2 strips user and
// assistant content (Python `.strip()`) but not the system message. Expected strings in
// tests/data/chat_template were rendered by transformers (scripts/make_chat_template_expected.py).
#include "runtime/tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"

namespace conveyor {

namespace {

struct Family {
  ChatTemplateKind kind;
  const char* name;
  const char* marker;         // a string every template of the family contains
  const char* second_marker;  // and this too ("" when none): Mistral's [INST] templates lack <<SYS>>
};                            // and render differently, so they must not pass for Llama-2
const Family kFamilies[] = {
    {ChatTemplateKind::kChatML, "chatml", "<|im_start|>", ""},
    {ChatTemplateKind::kLlama3, "llama3", "<|start_header_id|>", ""},
    {ChatTemplateKind::kLlama2, "llama2", "[INST]", "<<SYS>>"},
};

// Python str.strip() / Jinja trim: ASCII whitespace (enough for prompts; both also strip Unicode
// spaces, which prompts rarely end with).
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// The fixed system message of a ChatML template, written as a literal
// '<|im_start|>system\n...<|im_end|>' string; "" when the template has none.
std::string chatml_default_system(const std::string& jinja) {
  // The template source spells the newline as the escape \n, or (GGUF metadata) as a real newline.
  size_t begin = std::string::npos;
  for (const std::string open : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    size_t at = jinja.find(open);
    if (at != std::string::npos) {
      begin = at + open.size();
      break;
    }
  }
  if (begin == std::string::npos) return "";
  size_t end = jinja.find("<|im_end|>", begin);
  if (end == std::string::npos) return "";
  std::string text = jinja.substr(begin, end - begin);
  // A template that builds the system turn from a variable ('...system\n' + message['content']) has
  // Jinja syntax or a quote here, not a literal message.
  if (text.find_first_of("'\"{}+") != std::string::npos) return "";
  return text;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& bos) {
  std::string out = bos;
  for (const auto& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + strip(m.content) + "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_llama2(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& bos, const std::string& eos) {
  size_t first = 0;
  std::string system;
  bool has_system = !messages.empty() && messages[0].role == "system";
  if (has_system) {
    system = messages[0].content;
    first = 1;
  }
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    bool want_user = (i - first) % 2 == 0;
    if ((m.role == "user") != want_user || m.role == "system") {
      CONVEYOR_THROW("the llama2 chat template needs roles to alternate user/assistant/user/... after an optional "
                     "first system message; message ", i, " has role '", m.role, "'");
    }
    std::string content = m.content;
    if (i == first && has_system) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out += bos + "[INST] " + strip(content) + " [/INST]";
    } else {
      out += " " + strip(content) + " " + eos;
    }
  }
  // The Llama-2 template has no generation prompt: the text after [/INST] is already the assistant's.
  (void)add_generation_prompt;
  return out;
}

}  // namespace

std::vector<std::string> ChatTemplate::names() {
  std::vector<std::string> out;
  for (const auto& f : kFamilies) out.push_back(f.name);
  return out;
}

const std::string& ChatTemplate::name() const {
  static const std::vector<std::string> all = names();
  return all[static_cast<size_t>(kind_)];
}

ChatTemplate ChatTemplate::by_name(const std::string& name) {
  for (const auto& f : kFamilies) {
    if (name == f.name) return ChatTemplate(f.kind, "");
  }
  CONVEYOR_THROW("unknown chat template '", name, "'", did_you_mean(name, names()), "; known: ", join(names(), ", "));
}

std::optional<ChatTemplate> ChatTemplate::detect(const std::string& jinja) {
  for (const auto& f : kFamilies) {
    if (jinja.find(f.marker) == std::string::npos || jinja.find(f.second_marker) == std::string::npos) continue;
    std::string system = f.kind == ChatTemplateKind::kChatML ? chatml_default_system(jinja) : "";
    return ChatTemplate(f.kind, system);
  }
  return std::nullopt;
}

std::string ChatTemplate::render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string out;
  if (!default_system_.empty() && (messages.empty() || messages[0].role != "system")) {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::string& bos, const std::string& eos) const {
  switch (kind_) {
    case ChatTemplateKind::kChatML:
      return render_chatml(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
      return render_llama3(messages, add_generation_prompt, bos);
    case ChatTemplateKind::kLlama2:
      return render_llama2(messages, add_generation_prompt, bos, eos);
  }
  CONVEYOR_THROW("unhandled chat template kind ", static_cast<int>(kind_));
}

ChatTemplateChoice choose_chat_template(const std::string& name, const std::string& metadata_template) {
  ChatTemplateChoice c;
  if (!name.empty()) {
    c.chosen = ChatTemplate::by_name(name);
    return c;
  }
  if (metadata_template.empty()) {
    c.why_none = "the model has no chat template in its metadata; pass --chat-template " + join(ChatTemplate::names(), "|") +
                 " or send /v1/completions requests";
    return c;
  }
  c.chosen = ChatTemplate::detect(metadata_template);
  if (!c.chosen) {
    c.why_none = "the model's chat template is none of the built-in families (" + join(ChatTemplate::names(), ", ") +
                 "); pass --chat-template NAME if one matches, or send /v1/completions requests";
  }
  return c;
}

std::string model_chat_template(const std::string& model_path) {
  namespace fs = std::filesystem;
  if (ends_with(model_path, ".gguf")) {
    GgufFile gguf(model_path);
    return gguf.has("tokenizer.chat_template") ? gguf.get_string("tokenizer.chat_template") : "";
  }
  fs::path cfg = fs::path(model_path) / "tokenizer_config.json";
  if (!fs::exists(cfg)) return "";
  std::ifstream in(cfg);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string()) return j["chat_template"];
  return "";
}

std::vector<int32_t> encode_chat(const ChatTemplate& chat, const Tokenizer& tok, const std::vector<ChatMessage>& messages) {
  const std::string bos = tok.bos_id() >= 0 ? tok.id_to_token(tok.bos_id()) : "";
  const std::string eos = tok.eos_ids().empty() ? "" : tok.id_to_token(tok.eos_ids().front());
  return tok.encode(chat.render(messages, true, bos, eos), /*add_bos=*/false, /*parse_special=*/true);
}

}  // namespace conveyor
