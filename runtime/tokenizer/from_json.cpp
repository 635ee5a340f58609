// Loads a Tokenizer from an HF tokenizer.json: model BPE, the normalizers, pre-tokenizers,
// post-processors and decoders that byte-level (GPT-2 / Llama 3 / Qwen2 / SmolLM2) and SentencePiece-
// style (Llama 2 / Mistral) files use. Anything else is refused with its JSON path, never ignored.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/tokenizer/impl.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

namespace {

using json = nlohmann::json;

// Where we are in the file, for messages: "tokenizer.json: pre_tokenizer.pretokenizers[1]".
struct Ctx {
  std::string origin;
  std::string path;
  Ctx at(const std::string& key) const { return {origin, path.empty() ? key : path + "." + key}; }
  Ctx at(size_t i) const { return {origin, path + "[" + std::to_string(i) + "]"}; }
  std::string where() const { return origin + ": " + path; }
};

template <typename T>
T get_or(const json& j, const char* key, T fallback, const Ctx& c) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception& e) {
    CONVEYOR_THROW(c.at(key).where(), " has the wrong type (", e.what(), ")");
  }
}

std::string type_of(const json& j, const Ctx& c) {
  CONVEYOR_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), c.where(),
                 " must be an object with a string \"type\"");
  return j["type"].get<std::string>();
}

// {"String": s} or {"Regex": r} -> a compiled regex.
std::shared_ptr<const Regex> pattern_of(const json& j, const Ctx& c) {
  CONVEYOR_CHECK(j.is_object(), c.where(), " must be {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return std::make_shared<const Regex>(Regex::escape(j["String"].get<std::string>()), c.where());
  if (j.contains("Regex")) return std::make_shared<const Regex>(j["Regex"].get<std::string>(), c.where());
  CONVEYOR_THROW(c.where(), " must be {\"String\": ...} or {\"Regex\": ...}");
}

[[noreturn]] void unsupported(const std::string& what, const std::string& type, const Ctx& c, const char* hint) {
  CONVEYOR_THROW(c.where(), ": ", what, " type '", type, "' is not supported (", hint, ")");
}

void parse_normalizer(const json& j, Normalizer& out, const Ctx& c) {
  if (j.is_null()) return;
  const std::string type = type_of(j, c);
  if (type == "Sequence") {
    const json& list = j.at("normalizers");
    for (size_t i = 0; i < list.size(); ++i) parse_normalizer(list[i], out, c.at("normalizers").at(i));
  } else if (type == "Prepend") {
    out.add_prepend(get_or<std::string>(j, "prepend", "", c));
  } else if (type == "Replace") {
    out.add_replace(pattern_of(j.at("pattern"), c.at("pattern")), get_or<std::string>(j, "content", "", c));
  } else {
    unsupported("normalizer", type, c, "supported: Sequence, Prepend, Replace; Unicode normalization (NFC, NFKC) "
                "needs tables conveyor does not carry yet");
  }
}

void parse_pre_tokenizer(const json& j, PreTokenizer& out, const Ctx& c) {
  if (j.is_null()) return;
  const std::string type = type_of(j, c);
  if (type == "Sequence") {
    const json& list = j.at("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i) parse_pre_tokenizer(list[i], out, c.at("pretokenizers").at(i));
  } else if (type == "Split") {
    out.add_split(pattern_of(j.at("pattern"), c.at("pattern")),
                  parse_split_behavior(get_or<std::string>(j, "behavior", "Isolated", c), c.at("behavior").where()),
                  get_or<bool>(j, "invert", false, c));
  } else if (type == "Digits") {
    out.add_digits(get_or<bool>(j, "individual_digits", false, c));
  } else if (type == "ByteLevel") {
    out.add_byte_level(get_or<bool>(j, "add_prefix_space", true, c), get_or<bool>(j, "use_regex", true, c));
  } else if (type == "Metaspace") {
    std::string scheme = get_or<std::string>(j, "prepend_scheme", "", c);
    if (scheme.empty()) scheme = get_or<bool>(j, "add_prefix_space", true, c) ? "always" : "never";  // older files
    out.add_metaspace(get_or<std::string>(j, "replacement", "\xE2\x96\x81", c),
                      parse_prepend_scheme(scheme, c.at("prepend_scheme").where()), get_or<bool>(j, "split", true, c));
  } else {
    unsupported("pre-tokenizer", type, c, "supported: Sequence, Split, Digits, ByteLevel, Metaspace");
  }
}

void parse_decoder(const json& j, DecoderSpec& out, bool& fused, const Ctx& c) {
  const std::string type = type_of(j, c);
  if (type == "Sequence") {
    const json& list = j.at("decoders");
    for (size_t i = 0; i < list.size(); ++i) parse_decoder(list[i], out, fused, c.at("decoders").at(i));
  } else if (type == "ByteLevel") {
    out.byte_level = true;
  } else if (type == "Replace") {
    const json& p = j.at("pattern");
    CONVEYOR_CHECK(p.contains("String"), c.at("pattern").where(), ": only a String pattern is supported in a decoder");
    out.rewrites.push_back({p["String"].get<std::string>(), get_or<std::string>(j, "content", "", c), false});
  } else if (type == "Metaspace") {
    std::string scheme = get_or<std::string>(j, "prepend_scheme", "", c);
    if (scheme.empty()) scheme = get_or<bool>(j, "add_prefix_space", true, c) ? "always" : "never";
    out.rewrites.push_back({get_or<std::string>(j, "replacement", "\xE2\x96\x81", c), " ", scheme != "never"});
  } else if (type == "ByteFallback") {
    out.byte_fallback = true;
  } else if (type == "Fuse") {
    fused = true;
  } else if (type == "Strip") {
    out.strip_content = get_or<std::string>(j, "content", " ", c);
    out.strip_start = get_or<size_t>(j, "start", 0, c);
    out.strip_stop = get_or<size_t>(j, "stop", 0, c);
    out.strip_after_fuse = fused;
    CONVEYOR_CHECK(!fused || out.strip_stop == 0, c.where(), ": Strip with stop > 0 after Fuse is not supported");
  } else {
    unsupported("decoder", type, c, "supported: Sequence, ByteLevel, Replace, Metaspace, ByteFallback, Fuse, Strip");
  }
}

// Template items before the sequence go to prefix, after it to suffix.
void parse_post_processor(const json& j, const Tokenizer::Impl& im, std::vector<int32_t>& prefix,
                          std::vector<int32_t>& suffix, const Ctx& c) {
  if (j.is_null()) return;
  const std::string type = type_of(j, c);
  if (type == "Sequence") {
    const json& list = j.at("processors");
    for (size_t i = 0; i < list.size(); ++i) parse_post_processor(list[i], im, prefix, suffix, c.at("processors").at(i));
  } else if (type == "ByteLevel") {
    // Only trims offsets; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    const json& single = j.at("single");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const json& item = single[i];
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      CONVEYOR_CHECK(item.contains("SpecialToken"), c.at("single").at(i).where(), ": expected Sequence or SpecialToken");
      const std::string name = item["SpecialToken"].at("id").get<std::string>();
      const json& special = j.at("special_tokens");
      CONVEYOR_CHECK(special.contains(name), c.at("special_tokens").where(), ": the template uses '", name,
                     "' but it is not listed here");
      for (const json& id : special[name].at("ids")) (seen_sequence ? suffix : prefix).push_back(id.get<int32_t>());
    }
  } else {
    unsupported("post-processor", type, c, "supported: Sequence, ByteLevel, TemplateProcessing");
  }
}

std::shared_ptr<const BpeModel> parse_model(const json& j, const Ctx& c) {
  const std::string type = get_or<std::string>(j, "type", "BPE", c);
  CONVEYOR_CHECK(type == "BPE", c.at("type").where(), ": model type '", type,
                 "' is not supported (conveyor implements BPE: byte-level and SentencePiece-style)");
  CONVEYOR_CHECK(get_or<double>(j, "dropout", 0.0, c) == 0.0, c.at("dropout").where(),
                 ": BPE dropout is for training; set it to null for inference");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    CONVEYOR_CHECK(get_or<std::string>(j, key, "", c).empty(), c.at(key).where(),
                   ": a non-empty value is not supported (no LLM tokenizer conveyor targets uses it)");
  }
  const json& vocab_json = j.at("vocab");
  CONVEYOR_CHECK(vocab_json.is_object(), c.at("vocab").where(), " must be an object token -> id");
  std::vector<std::string> vocab(vocab_json.size());
  for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    CONVEYOR_CHECK(id >= 0 && id < (int64_t{1} << 24), c.at("vocab").where(), ": token '", it.key(), "' has id ", id,
                   " outside [0, 2^24)");
    if (static_cast<size_t>(id) >= vocab.size()) vocab.resize(static_cast<size_t>(id) + 1);
    CONVEYOR_CHECK(vocab[id].empty(), c.at("vocab").where(), ": id ", id, " is used by both '", vocab[id], "' and '",
                   it.key(), "'");
    vocab[id] = it.key();
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const json& merges_json = j.contains("merges") ? j["merges"] : json::array();
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    if (m.is_array() && m.size() == 2) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    const std::string s = m.is_string() ? m.get<std::string>() : std::string();
    const size_t space = s.find(' ');
    CONVEYOR_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size(), c.at("merges").at(i).where(),
                   ": a merge must be \"a b\" or [\"a\", \"b\"]");
    merges.emplace_back(s.substr(0, space), s.substr(space + 1));
  }
  BpeOptions opt;
  const std::string unk = get_or<std::string>(j, "unk_token", "", c);
  if (!unk.empty()) {
    CONVEYOR_CHECK(vocab_json.contains(unk), c.at("unk_token").where(), ": '", unk, "' is not in the vocabulary");
    opt.unk_id = vocab_json[unk].get<int32_t>();
  }
  opt.fuse_unk = get_or<bool>(j, "fuse_unk", false, c);
  opt.byte_fallback = get_or<bool>(j, "byte_fallback", false, c);
  opt.ignore_merges = get_or<bool>(j, "ignore_merges", false, c);
  return std::make_shared<const BpeModel>(std::move(vocab), merges, opt, c.origin);
}

}  // namespace

Tokenizer Tokenizer::from_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot open tokenizer file ", path, "; check the path (an HF model directory has a tokenizer.json)");
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json_string(ss.str(), path);
}

Tokenizer Tokenizer::from_json_string(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    CONVEYOR_THROW(origin, " is not valid JSON: ", e.what());
  }
  CONVEYOR_CHECK(j.is_object() && j.contains("model"), origin, " has no \"model\": not a tokenizer.json");
  const Ctx root{origin, ""};
  auto im = std::make_shared<Impl>();
  im->origin = origin;
  im->model = parse_model(j["model"], root.at("model"));
  parse_normalizer(j.value("normalizer", json()), im->normalizer, root.at("normalizer"));
  parse_pre_tokenizer(j.value("pre_tokenizer", json()), im->pre_tokenizer, root.at("pre_tokenizer"));
  const json& added = j.contains("added_tokens") ? j["added_tokens"] : json::array();
  for (size_t i = 0; i < added.size(); ++i) {
    const json& t = added[i];
    const Ctx c = root.at("added_tokens").at(i);
    AddedToken a;
    a.id = t.at("id").get<int32_t>();
    a.content = t.at("content").get<std::string>();
    a.special = get_or<bool>(t, "special", false, c);
    a.normalized = get_or<bool>(t, "normalized", !a.special, c);
    a.lstrip = get_or<bool>(t, "lstrip", false, c);
    a.rstrip = get_or<bool>(t, "rstrip", false, c);
    a.single_word = get_or<bool>(t, "single_word", false, c);
    CONVEYOR_CHECK(a.id >= 0, c.where(), ": negative id");
    // HF gives an added token that the model already has the model's id, whatever the file says.
    const int32_t model_id = im->model->token_to_id(a.content);
    if (model_id >= 0) a.id = model_id;
    im->added.add(a);
  }
  const json decoder = j.value("decoder", json());
  bool fused = false;
  if (decoder.is_null()) {
    im->decoder.join_with_space = true;
  } else {
    parse_decoder(decoder, im->decoder, fused, root.at("decoder"));
  }
  parse_post_processor(j.value("post_processor", json()), *im, im->prefix_ids, im->suffix_ids,
                       root.at("post_processor"));
  im->kind = im->pre_tokenizer.byte_level() ? kByteLevelBpe : kSentencePieceBpe;
  if (im->prefix_ids.size() == 1) im->bos_id = im->prefix_ids[0];
  if (im->suffix_ids.size() == 1) im->eos_ids = im->suffix_ids;
  return make_tokenizer(std::move(im));
}

}  // namespace conveyor
