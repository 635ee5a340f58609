// Builds a Tokenizer from GGUF tokenizer metadata (tokenizer.ggml.*), the way HF transformers
// converts a GGUF tokenizer: "gpt2" -> byte-level BPE with the split regex its `pre` names,
// "llama" -> SentencePiece-style BPE (Metaspace, byte fallback) whose merges come from the file or,
// when absent, from the token scores. CONTROL tokens become special added tokens.
// gguf_tokenizer_metadata() reads those keys from a GgufFile through its typed getters.
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/impl.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;
const char* const kOrigin = "GGUF tokenizer metadata";
const char* const kMetaspace = "\xE2\x96\x81";  // U+2581

// Split regexes of the byte-level vocabularies, by tokenizer.ggml.pre. "" means: GPT-2's own regex
// inside ByteLevel; "digits" means: digits one by one, then GPT-2's regex (SmolLM2, StarCoder).
const std::map<std::string, std::string>& pre_patterns() {
  static const std::string kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::map<std::string, std::string> kPatterns = {
      {"default", ""},       {"gpt2", ""},          {"gpt-2", ""},       {"llama3", kLlama3},
      {"llama-v3", kLlama3}, {"llama-bpe", kLlama3}, {"falcon3", kLlama3}, {"dbrx", kLlama3},
      {"smaug-bpe", kLlama3}, {"pixtral", kLlama3}, {"qwen2", kQwen2},   {"deepseek-r1-qwen", kQwen2},
      {"megrez", kQwen2},    {"smollm", "digits"},  {"starcoder", "digits"}, {"refact", "digits"},
      {"codeshell", "digits"},
  };
  return kPatterns;
}

void set_byte_level_pre_tokenizer(const std::string& pre, PreTokenizer& out) {
  const auto& table = pre_patterns();
  auto it = table.find(pre.empty() ? "default" : pre);
  if (it == table.end()) {
    std::vector<std::string> names;
    for (const auto& [name, _] : table) names.push_back(name);
    CONVEYOR_THROW(kOrigin, ": tokenizer.ggml.pre '", pre, "' is not known", did_you_mean(pre, names),
                   "; known: ", join(names, ", "), ". Add its split regex to runtime/tokenizer/from_gguf.cpp");
  }
  if (it->second.empty() || it->second == "digits") {
    if (it->second == "digits") out.add_digits(/*individual=*/true);
    out.add_byte_level(/*add_prefix_space=*/false, /*use_regex=*/true);
    return;
  }
  out.add_split(std::make_shared<const Regex>(it->second, std::string(kOrigin) + " pre '" + pre + "'"),
                SplitBehavior::kIsolated, false);
  out.add_byte_level(false, false);
}

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> cps;
  size_t pos = 0;
  while (pos < s.size()) cps.push_back(utf8_next(s, pos));
  return cps;
}

// Merges implied by a SentencePiece vocabulary: every split of a token into two tokens, best score
// first (ties: longer left part, then longer right part first), as transformers' generate_merges.
std::vector<std::pair<std::string, std::string>> merges_from_scores(const std::vector<std::string>& tokens,
                                                                    const std::vector<float>& scores) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < tokens.size(); ++i) index[tokens[i]] = i;  // a repeated token keeps its last id
  struct Cand {
    size_t left, right;  // token ids
    float score;
    size_t len_left, len_right;  // in code points
  };
  std::vector<Cand> all;
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (index[tokens[t]] != t) continue;  // each distinct token once, at the id it keeps
    const std::string& tok = tokens[t];
    std::vector<Cand> local;
    size_t pos = 0, cps = 0;
    const size_t total = code_points(tok).size();
    while (pos < tok.size()) {
      pos += std::max<size_t>(1, utf8_valid_char_len(tok, pos));
      ++cps;
      if (pos >= tok.size()) break;
      auto l = index.find(tok.substr(0, pos)), r = index.find(tok.substr(pos));
      if (l != index.end() && r != index.end()) local.push_back({l->second, r->second, scores[index[tok]], cps, total - cps});
    }
    std::stable_sort(local.begin(), local.end(),
                     [](const Cand& a, const Cand& b) { return std::tie(a.left, a.right) < std::tie(b.left, b.right); });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Cand& a, const Cand& b) {
    return std::tie(a.score, a.len_left, a.len_right) > std::tie(b.score, b.len_left, b.len_right);
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(all.size());
  for (const Cand& c : all) merges.emplace_back(tokens[c.left], tokens[c.right]);
  return merges;
}

void check_metadata(const GgufTokenizerMetadata& m) {
  CONVEYOR_CHECK(m.model == "gpt2" || m.model == "llama", kOrigin, ": tokenizer.ggml.model '", m.model,
                 "' is not supported; conveyor reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE)");
  CONVEYOR_CHECK(!m.tokens.empty(), kOrigin, ": tokenizer.ggml.tokens is empty");
  const size_t n = m.tokens.size();
  CONVEYOR_CHECK(m.token_type.empty() || m.token_type.size() == n, kOrigin, ": tokenizer.ggml.token_type has ",
                 m.token_type.size(), " entries for ", n, " tokens");
  CONVEYOR_CHECK(m.scores.empty() || m.scores.size() == n, kOrigin, ": tokenizer.ggml.scores has ", m.scores.size(),
                 " entries for ", n, " tokens");
  for (int32_t id : {m.bos_id, m.eos_id, m.unk_id, m.pad_id}) {
    CONVEYOR_CHECK(id >= -1 && id < static_cast<int32_t>(n), kOrigin, ": special token id ", id,
                   " is outside the vocabulary of ", n, " tokens");
  }
  for (size_t i = 0; i < n; ++i) {
    CONVEYOR_CHECK(utf8_first_invalid(m.tokens[i]) == std::string::npos, kOrigin, ": token ", i,
                   " is not valid UTF-8");
  }
  CONVEYOR_CHECK(m.model != "gpt2" || !m.merges.empty(), kOrigin,
                 ": a \"gpt2\" tokenizer needs tokenizer.ggml.merges, and this file has none");
  CONVEYOR_CHECK(m.model != "llama" || !m.merges.empty() || !m.scores.empty(), kOrigin,
                 ": a \"llama\" tokenizer needs tokenizer.ggml.merges or tokenizer.ggml.scores");
}

// CONTROL tokens and the named special ids become special added tokens, USER_DEFINED ones plain ones.
void add_gguf_added_tokens(const GgufTokenizerMetadata& m, const std::vector<std::string>& vocab, Tokenizer::Impl& im) {
  const bool byte_level = m.model == "gpt2";
  auto usable = [&](size_t i) { return !byte_level || vocab[i] == m.tokens[i]; };  // spelled in the alphabet
  for (int32_t id : {m.unk_id, m.bos_id, m.eos_id, m.pad_id}) {
    if (id >= 0 && usable(static_cast<size_t>(id))) im.added.add({m.tokens[id], id, true, false});
  }
  for (size_t i = 0; i < m.token_type.size(); ++i) {
    if (!usable(i)) continue;
    const int32_t id = static_cast<int32_t>(i);
    if (m.token_type[i] == kTypeControl) im.added.add({m.tokens[i], id, true, false});
    if (m.token_type[i] == kTypeUserDefined) im.added.add({m.tokens[i], id, false, false});
  }
}

// A token id key: absent (or -1, as some converters write) means none. Other values must fit an id.
int32_t read_token_id(const GgufFile& g, const std::string& key) {
  if (!g.has(key)) return -1;
  const int64_t id = g.get_i64(key);
  if (id == -1) return -1;
  CONVEYOR_CHECK(id >= 0 && id < std::numeric_limits<int32_t>::max(), "GGUF file '", g.path(), "': key '", key,
                 "' holds ", id, ", which is not a token id; the file's tokenizer metadata is corrupt");
  return static_cast<int32_t>(id);
}

}  // namespace

GgufTokenizerMetadata gguf_tokenizer_metadata(const GgufFile& g) {
  const std::string p = "tokenizer.ggml.";
  GgufTokenizerMetadata m;
  m.model = g.get_string(p + "model");
  if (g.has(p + "pre")) m.pre = g.get_string(p + "pre");
  m.tokens = g.get_string_array(p + "tokens");
  if (g.has(p + "token_type")) m.token_type = g.get_i32_array(p + "token_type");
  if (g.has(p + "scores")) m.scores = g.get_f32_array(p + "scores");
  if (g.has(p + "merges")) m.merges = g.get_string_array(p + "merges");
  m.bos_id = read_token_id(g, p + "bos_token_id");
  m.eos_id = read_token_id(g, p + "eos_token_id");
  m.unk_id = read_token_id(g, p + "unknown_token_id");
  m.pad_id = read_token_id(g, p + "padding_token_id");
  for (const char* k : {"eot_token_id", "eom_token_id"}) {
    const int32_t id = read_token_id(g, p + k);
    if (id >= 0) m.eot_ids.push_back(id);
  }
  if (g.has(p + "add_bos_token")) m.add_bos_token = g.get_bool(p + "add_bos_token");
  if (g.has(p + "add_space_prefix")) m.add_space_prefix = g.get_bool(p + "add_space_prefix");
  // An EOS appended to every prompt changes the ids; refuse rather than encode differently.
  CONVEYOR_CHECK(!g.has(p + "add_eos_token") || !g.get_bool(p + "add_eos_token"), "GGUF file '", g.path(),
                 "': tokenizer.ggml.add_eos_token is true, which conveyor's tokenizer does not implement; ",
                 "pass a tokenizer.json with --tokenizer instead");
  return m;
}

bool gguf_has_tokenizer(const GgufFile& g) {
  if (!g.has("tokenizer.ggml.tokens")) return false;
  return !g.has("tokenizer.ggml.model") || g.get_string("tokenizer.ggml.model") != "none";
}

Tokenizer tokenizer_from_gguf(const GgufFile& g) {
  const GgufTokenizerMetadata m = gguf_tokenizer_metadata(g);
  try {
    return Tokenizer::from_gguf_metadata(m);
  } catch (const Error& e) {
    CONVEYOR_THROW("GGUF file '", g.path(), "': ", e.message());
  }
}

Tokenizer Tokenizer::from_gguf_metadata(const GgufTokenizerMetadata& m) {
  check_metadata(m);
  auto im = std::make_shared<Impl>();
  im->origin = kOrigin;
  const bool byte_level = m.model == "gpt2";
  std::vector<std::string> vocab = m.tokens;
  std::vector<std::pair<std::string, std::string>> merges;
  for (size_t i = 0; i < m.merges.size(); ++i) {
    const size_t space = m.merges[i].find(' ');
    CONVEYOR_CHECK(space != std::string::npos, kOrigin, ": tokenizer.ggml.merges[", i, "] '", m.merges[i],
                   "' is not \"a b\"");
    merges.emplace_back(m.merges[i].substr(0, space), m.merges[i].substr(space + 1));
  }
  BpeOptions opt;
  if (byte_level) {
    for (std::string& t : vocab) {  // tokens outside the byte alphabet are respelled in it, as HF does
      std::string bytes;
      if (!byte_level_decode(t, bytes)) t = byte_level_encode(t);
    }
    set_byte_level_pre_tokenizer(m.pre, im->pre_tokenizer);
    im->decoder.byte_level = true;
    im->kind = kByteLevelBpe;
  } else {
    if (merges.empty()) merges = merges_from_scores(vocab, m.scores);
    opt.byte_fallback = true;
    // HF's converter sets fuse_unk but no unk id: a character with neither a token nor byte tokens
    // is dropped. Byte tokens <0x00>..<0xFF> normally cover everything.
    opt.fuse_unk = true;
    const bool prefix = m.add_space_prefix.value_or(true);
    im->pre_tokenizer.add_metaspace(kMetaspace, prefix ? PrependScheme::kFirst : PrependScheme::kNever, false);
    im->decoder.rewrites.push_back({kMetaspace, " ", false});
    im->decoder.byte_fallback = true;
    if (prefix) {
      im->decoder.strip_content = " ";
      im->decoder.strip_start = 1;
      im->decoder.strip_after_fuse = true;
    }
    im->kind = kSentencePieceBpe;
  }
  add_gguf_added_tokens(m, vocab, *im);
  im->model = std::make_shared<const BpeModel>(std::move(vocab), merges, opt, kOrigin);
  if (m.add_bos_token.value_or(!byte_level) && m.bos_id >= 0) im->prefix_ids = {m.bos_id};
  im->bos_id = m.bos_id;
  if (m.eos_id >= 0) im->eos_ids.push_back(m.eos_id);
  for (int32_t id : m.eot_ids) {
    if (id >= 0 && std::find(im->eos_ids.begin(), im->eos_ids.end(), id) == im->eos_ids.end()) im->eos_ids.push_back(id);
  }
  return make_tokenizer(std::move(im));
}

}  // namespace conveyor
