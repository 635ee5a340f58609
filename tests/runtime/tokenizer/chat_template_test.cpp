// Chat templates against strings rendered by HF transformers (tests/data/chat_template/expected.jsonl,
// made by scripts/make_chat_template_expected.py): each family is detected from its Jinja source and
// must render every random conversation exactly.
#include "runtime/model/gguf_file.h"
#include "runtime/tokenizer/chat_template.h"
#include "tests/runtime/model/formats_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;

// The template of each family: committed for our own Jinja sources; for the real model's template,
// read from the SmolLM2 GGUF at test time (it is the model's text, not ours to commit).
std::string template_of(const json& family) {
  if (!family["chat_template"].is_null()) return family["chat_template"].get<std::string>();
  GgufFile gguf(testing::test_model_path());
  return gguf.get_string("tokenizer.chat_template");
}

std::vector<json> load_expected() {
  std::ifstream in(testing::data_path("chat_template/expected.jsonl"));
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

TEST(ChatTemplate, RendersExactlyAsTransformers) {
  std::vector<json> families = load_expected();
  ASSERT_EQ(families.size(), 4u);
  size_t checked = 0;
  for (const json& f : families) {
    std::string source = f["source"];
    auto tmpl = ChatTemplate::detect(template_of(f));
    ASSERT_TRUE(tmpl.has_value()) << source;
    EXPECT_EQ(tmpl->name(), f["family"].get<std::string>()) << source;
    for (const json& c : f["cases"]) {
      std::vector<ChatMessage> messages;
      for (const json& m : c["messages"]) messages.push_back({m["role"], m["content"]});
      std::string got = tmpl->render(messages, c["add_generation_prompt"], f["bos"], f["eos"]);
      ASSERT_EQ(got, c["expected"].get<std::string>()) << source << " case " << checked;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 48u);
}

TEST(ChatTemplate, KeepsTheDefaultSystemMessageOfChatMl) {
  std::vector<json> families = load_expected();
  auto smol = ChatTemplate::detect(template_of(families[0]));
  ASSERT_TRUE(smol.has_value());
  EXPECT_EQ(smol->default_system(), "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  std::string built = "{{'<|im_start|>system\\n' + message['content'] + '<|im_end|>'}}";
  EXPECT_EQ(ChatTemplate::detect(built)->default_system(), "");
  EXPECT_EQ(ChatTemplate::by_name("chatml").render({{"user", "hi"}}, true, "", ""),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnknownTemplatesAndNames) {
  // Mistral's [INST] template has no <<SYS>> block and renders differently from Llama-2.
  EXPECT_FALSE(ChatTemplate::detect("{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]").has_value());
  EXPECT_FALSE(ChatTemplate::detect("{{ messages[0]['content'] }}").has_value());
  try {
    ChatTemplate::by_name("chatm");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("did you mean 'chatml'"), std::string::npos) << e.message();
  }
  ChatTemplateChoice none = choose_chat_template("", "");
  EXPECT_FALSE(none.chosen.has_value());
  EXPECT_NE(none.why_none.find("--chat-template"), std::string::npos);
  ChatTemplateChoice unknown = choose_chat_template("", "{{ x }}");
  EXPECT_FALSE(unknown.chosen.has_value());
  EXPECT_NE(unknown.why_none.find("none of the built-in"), std::string::npos);
  ChatTemplateChoice forced = choose_chat_template("llama3", "{{ x }}");
  ASSERT_TRUE(forced.chosen.has_value());
  EXPECT_EQ(forced.chosen->kind(), ChatTemplateKind::kLlama3);
}

TEST(ChatTemplate, Llama2RejectsRolesThatDoNotAlternate) {
  ChatTemplate t = ChatTemplate::by_name("llama2");
  EXPECT_THROW(t.render({{"user", "a"}, {"user", "b"}}, true, "<s>", "</s>"), Error);
  EXPECT_THROW(t.render({{"assistant", "a"}}, true, "<s>", "</s>"), Error);
  EXPECT_THROW(t.render({{"user", "a"}, {"system", "b"}}, true, "<s>", "</s>"), Error);
}

// The model's own template text: from GGUF metadata, from an HF directory's tokenizer_config.json,
// and "" for a directory without one (no file, no string, unreadable JSON).
TEST(ChatTemplate, ModelChatTemplateFromGgufAndHfDirectories) {
  GgufFile gguf(testing::test_model_path());
  EXPECT_EQ(model_chat_template(testing::test_model_path()), gguf.get_string("tokenizer.chat_template"));
  const std::string dir = testing::temp_dir("model_chat_template");
  EXPECT_EQ(model_chat_template(dir), "");
  const std::string jinja = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>{% endfor %}";
  std::ofstream(dir + "/tokenizer_config.json") << json({{"chat_template", jinja}, {"bos_token", "<s>"}}).dump();
  EXPECT_EQ(model_chat_template(dir), jinja);
  std::ofstream(dir + "/tokenizer_config.json") << json({{"chat_template", json::array({{{"name", "x"}}})}}).dump();
  EXPECT_EQ(model_chat_template(dir), "");
  std::ofstream(dir + "/tokenizer_config.json") << "{\"chat_template\": ";
  EXPECT_EQ(model_chat_template(dir), "");
}

// encode_chat fills in the tokenizer's BOS text (sp_bpe.json has no EOS) and parses it as the special
// token, so a Llama-2 conversation has exactly one BOS per user turn (none added on top).
TEST(ChatTemplate, EncodeChatUsesTheTokenizersBosAndEosAsSpecialTokens) {
  const Tokenizer tok = Tokenizer::from_json_file(testing::data_path("tokenizer/sp_bpe.json"));
  ASSERT_GE(tok.bos_id(), 0);
  const ChatTemplate llama2 = ChatTemplate::by_name("llama2");
  const std::vector<ChatMessage> messages = {{"system", "be brief"}, {"user", "hello there"}, {"assistant", "hi"},
                                             {"user", "what now"}};
  const std::vector<int32_t> ids = encode_chat(llama2, tok, messages);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), tok.bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.bos_id()), 2);
  const std::string text = llama2.render(messages, true, tok.id_to_token(tok.bos_id()), "");
  EXPECT_EQ(ids, tok.encode(text, /*add_bos=*/false, /*parse_special=*/true));
}

}  // namespace
}  // namespace conveyor
