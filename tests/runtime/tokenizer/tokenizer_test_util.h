// Test data for the tokenizer tests: the corpus, HF expected ids, the cached SmolLM2 files (made by
// scripts/prepare_tokenizer_data.sh) and GGUF metadata read from its JSON dump.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace conveyor::testing {

struct Expected {
  std::vector<int32_t> ids;
  std::vector<int32_t> plain;  // parse_special off, add_bos off
  std::string decoded;         // decode(ids, skip_special = true)
  std::string decoded_special; // decode(ids, skip_special = false)
};

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot open ", path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

inline std::vector<std::string> load_corpus() {
  std::vector<std::string> corpus;
  for (const std::string& line : read_lines(data_path("tokenizer/corpus.jsonl"))) {
    corpus.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  return corpus;
}

// Whether corpus string i is in an expected file whose header has this head and stride.
inline bool selected(size_t i, size_t head, size_t stride) { return i < head || i % stride == 0; }

// The expected file's records and the corpus strings they belong to (the header's head/stride
// selection), filled in where the generator left a field out as "same as".
inline std::vector<Expected> load_expected(const std::string& name, const std::vector<std::string>& all,
                                           std::vector<std::string>& corpus) {
  const auto lines = read_lines(data_path("tokenizer/" + name));
  CONVEYOR_CHECK(!lines.empty(), name, " is empty");
  const auto header = nlohmann::json::parse(lines[0]);
  const auto prefix = header.at("prefix").get<std::vector<int32_t>>();
  const auto suffix = header.value("suffix", std::vector<int32_t>{});
  const size_t stride = header.value("stride", size_t{1}), head = header.value("head", size_t{0});
  corpus.clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (selected(i, head, stride)) corpus.push_back(all[i]);
  }
  CONVEYOR_CHECK(lines.size() == corpus.size() + 1, name, " has ", lines.size() - 1, " records for ", corpus.size(),
                 " selected corpus strings; regenerate with scripts/make_tokenizer_test_data.sh");
  std::vector<Expected> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i]);
    Expected e;
    e.ids = j.at("ids").get<std::vector<int32_t>>();
    CONVEYOR_CHECK(e.ids.size() >= prefix.size() + suffix.size(), name, " line ", i + 1, ": fewer ids than the template");
    e.plain = j.contains("plain") ? j["plain"].get<std::vector<int32_t>>()
                                  : std::vector<int32_t>(e.ids.begin() + static_cast<long>(prefix.size()),
                                                         e.ids.end() - static_cast<long>(suffix.size()));
    e.decoded = j.contains("decoded") ? j["decoded"].get<std::string>() : corpus[i - 1];
    e.decoded_special = j.contains("decoded_special") ? j["decoded_special"].get<std::string>() : e.decoded;
    out.push_back(std::move(e));
  }
  return out;
}

inline std::string cache_dir() {
  const char* env = std::getenv("CONVEYOR_CACHE");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/conveyor";
}

// A file the prepare script puts in the cache; a missing one is an error that says what to run.
inline std::string cached_file(const std::string& name) {
  const std::string path = cache_dir() + "/" + name;
  CONVEYOR_CHECK(std::ifstream(path).good(), path, " is missing: run scripts/prepare_tokenizer_data.sh first ",
                 "(it fetches the SmolLM2 GGUF and writes the tokenizer files into $CONVEYOR_CACHE or ~/.cache/conveyor)");
  return path;
}

inline GgufTokenizerMetadata load_gguf_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot open ", path);
  const auto j = nlohmann::json::parse(in);
  GgufTokenizerMetadata m;
  m.model = j.at("model").get<std::string>();
  m.pre = j.value("pre", "");
  m.tokens = j.at("tokens").get<std::vector<std::string>>();
  if (j.contains("token_type")) m.token_type = j["token_type"].get<std::vector<int32_t>>();
  if (j.contains("scores")) m.scores = j["scores"].get<std::vector<float>>();
  if (j.contains("merges")) m.merges = j["merges"].get<std::vector<std::string>>();
  m.bos_id = j.value("bos_token_id", -1);
  m.eos_id = j.value("eos_token_id", -1);
  m.unk_id = j.value("unknown_token_id", -1);
  m.pad_id = j.value("padding_token_id", -1);
  if (j.contains("add_bos_token")) m.add_bos_token = j["add_bos_token"].get<bool>();
  if (j.contains("add_space_prefix")) m.add_space_prefix = j["add_space_prefix"].get<bool>();
  return m;
}

// A tokenizer.json with a variant patch applied: top-level keys replace, "model" keys merge,
// "added_tokens" are appended (the rules of scripts/make_tokenizer_expected.py --patch).
inline std::string patched_tokenizer_json(const std::string& base_path, const std::string& patch_path) {
  std::ifstream base_in(base_path, std::ios::binary), patch_in(patch_path, std::ios::binary);
  CONVEYOR_CHECK(base_in.good() && patch_in.good(), "cannot open ", base_path, " or ", patch_path);
  auto def = nlohmann::json::parse(base_in);
  const auto patch = nlohmann::json::parse(patch_in);
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it.key().rfind("_", 0) == 0) continue;
    if (it.key() == "model") {
      def["model"].update(it.value());
    } else if (it.key() == "added_tokens") {
      for (const auto& t : it.value()) def["added_tokens"].push_back(t);
    } else {
      def[it.key()] = it.value();
    }
  }
  return def.dump();
}

inline std::string show_ids(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? " " : "") << ids[i];
  os << "]";
  return os.str();
}

}  // namespace conveyor::testing
