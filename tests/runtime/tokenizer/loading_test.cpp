// load_tokenizer: the real SmolLM2 GGUF (through our GGUF reader) and an HF directory with its
// tokenizer.json both give HF's ids on the whole corpus, with BOS/EOS from generation_config.json; a
// directory or GGUF without a tokenizer gives nullptr; corrupt or misplaced tokenizer files are errors
// that name the file (and, for GGUF, the key).
#include "runtime/tokenizer/loading.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/model/gguf_file.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;

// Every corpus string encodes to HF's ids (BOS as the file's template says) and decodes back.
void expect_corpus_ids(const Tokenizer& tok, const std::string& expected_name) {
  std::vector<std::string> corpus;
  const auto expected = load_expected(expected_name, load_corpus(), corpus);
  size_t ok = 0, shown = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const bool same = tok.encode(corpus[i], /*add_bos=*/true) == expected[i].ids &&
                      tok.decode(expected[i].ids, /*skip_special=*/true) == expected[i].decoded;
    ok += same;
    if (!same && shown++ < 5) ADD_FAILURE() << "string " << i << ": " << nlohmann::json(corpus[i]).dump();
  }
  EXPECT_EQ(ok, corpus.size());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A model directory: a golden checkpoint's config.json plus the given generation_config.json.
std::string model_dir(const std::string& name, const std::string& generation_config) {
  const std::string dir = temp_dir(name);
  fs::copy_file(data_path("goldens/llama3_rope/config.json"), fs::path(dir) / "config.json");
  write_text(fs::path(dir) / "generation_config.json", generation_config);
  return dir;
}

TEST(TokenizerLoading, SmolLM2GgufThroughOurReaderMatchesHF) {
  const std::string path = test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  const GgufFile gguf(path);
  const GgufTokenizerMetadata meta = gguf_tokenizer_metadata(gguf);
  EXPECT_EQ(meta.model, "gpt2");
  EXPECT_EQ(meta.pre, "smollm");
  EXPECT_EQ(meta.tokens.size(), 49152u);
  EXPECT_EQ(meta.token_type.size(), 49152u);
  EXPECT_EQ(meta.merges.size(), 48900u);
  EXPECT_EQ(meta.bos_id, 1);
  EXPECT_EQ(meta.eos_id, 2);
  EXPECT_EQ(meta.unk_id, 0);
  EXPECT_EQ(meta.pad_id, 2);
  EXPECT_EQ(meta.add_bos_token, std::optional<bool>(false));

  const auto tok = load_tokenizer(path, "", model_spec_from_gguf(gguf));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), "byte-level BPE");
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  expect_corpus_ids(*tok, "smollm2_expected.jsonl");
}

// A SentencePiece-style ("llama") vocabulary in a real GGUF file (scripts/export_gguf_tokenizer.py
// --gguf-out): our reader gives the same metadata as the JSON dump it was written from, and HF's ids.
TEST(TokenizerLoading, SentencePieceGgufFileThroughOurReaderMatchesHF) {
  const std::string path = data_path("tokenizer/sp_bpe_tokenizer.gguf");
  const GgufTokenizerMetadata got = gguf_tokenizer_metadata(GgufFile(path));
  const GgufTokenizerMetadata want = load_gguf_metadata(data_path("tokenizer/sp_bpe_gguf_meta.json"));
  EXPECT_EQ(got.model, want.model);
  EXPECT_EQ(got.pre, want.pre);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.token_type, want.token_type);
  EXPECT_EQ(got.scores, want.scores);
  EXPECT_TRUE(got.merges.empty());
  EXPECT_EQ(got.bos_id, want.bos_id);
  EXPECT_EQ(got.eos_id, want.eos_id);
  EXPECT_EQ(got.unk_id, want.unk_id);
  EXPECT_EQ(got.add_bos_token, want.add_bos_token);
  EXPECT_EQ(got.add_space_prefix, want.add_space_prefix);
  ModelSpec spec;  // no model around it: BOS/EOS stay the file's
  const auto tok = load_tokenizer("", path, spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), "sentencepiece BPE");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  expect_corpus_ids(*tok, "sp_bpe_gguf_expected.jsonl");
}

// tokenizer.json has no EOS and (SmolLM2) no BOS template: both come from generation_config.json.
TEST(TokenizerLoading, HfDirectoryTakesBosEosFromGenerationConfig) {
  const std::string dir = model_dir("tokload_hf", R"({"bos_token_id": 1, "eos_token_id": [2, 0]})");
  fs::copy_file(cached_file("smollm2_tokenizer.json"), fs::path(dir) / "tokenizer.json");
  const ModelSpec spec = model_spec_from_hf_dir(dir);
  const auto tok = load_tokenizer(dir, "", spec);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_ids(), (std::vector<int32_t>{2, 0}));
  expect_corpus_ids(*tok, "smollm2_expected.jsonl");

  // An explicit path wins over the model's own: a file, or a directory holding tokenizer.json.
  const auto sp = load_tokenizer(dir, data_path("tokenizer/sp_bpe.json"), spec);
  ASSERT_NE(sp, nullptr);
  EXPECT_EQ(sp->kind(), "sentencepiece BPE");
  EXPECT_EQ(sp->eos_ids(), (std::vector<int32_t>{2, 0}));
  const auto again = load_tokenizer("", dir, spec);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->vocab_size(), 49152);
}

TEST(TokenizerLoading, NoTokenizerGivesNullptr) {
  const std::string golden = data_path("goldens/qwen2_tied_mqa");
  EXPECT_EQ(load_tokenizer(golden, "", model_spec_from_hf_dir(golden)), nullptr);
  // tiny_llama.gguf names a tokenizer model but carries no vocabulary.
  const std::string gguf = data_path("formats/tiny_llama.gguf");
  EXPECT_EQ(load_tokenizer(gguf, "", load_model_spec(gguf)), nullptr);
  const std::string preset = source_dir() + "/configs/models/llama-3-8b.yaml";
  EXPECT_EQ(load_tokenizer(preset, "", load_model_spec(preset)), nullptr);
}

TEST(TokenizerLoading, CorruptOrMissingTokenizerFilesAreErrorsNamingTheFile) {
  const std::string dir = model_dir("tokload_bad", R"({"eos_token_id": 2})");
  const ModelSpec spec = model_spec_from_hf_dir(dir);
  const std::string json = (fs::path(dir) / "tokenizer.json").string();
  write_text(json, R"({"model": {"type": "BPE", "vocab": {"a": 0}, )");  // cut off mid-object
  expect_error([&] { load_tokenizer(dir, "", spec); }, json);
  write_text(json, R"({"version": "1.0"})");
  expect_error([&] { load_tokenizer(dir, "", spec); }, json);
  fs::remove(json);
  write_text(fs::path(dir) / "tokenizer.model", "not read");
  expect_error([&] { load_tokenizer(dir, "", spec); }, "has tokenizer.model but no tokenizer.json");

  const std::string empty = temp_dir("tokload_empty");
  expect_error([&] { load_tokenizer(dir, empty, spec); }, "has no tokenizer.json");
  expect_error([&] { load_tokenizer(dir, empty + "/nope.json", spec); }, "does not exist");
  expect_error([&] { load_tokenizer("", data_path("formats/tiny_llama.gguf"), spec); }, "has no tokenizer");
}

TEST(TokenizerLoading, SpecIdsOutsideTheVocabularyAreRefused) {
  const std::string dir = model_dir("tokload_eos", R"({"eos_token_id": [2, 320]})");  // vocab_size is 320
  fs::copy_file(data_path("tokenizer/sp_bpe.json"), fs::path(dir) / "tokenizer.json");
  expect_error([&] { load_tokenizer(dir, "", model_spec_from_hf_dir(dir)); }, "eos_token_id 320");
}

// Writes a metadata-only GGUF v3 file (no tensors) so each tokenizer key can be made wrong.
struct TokenizerGguf {
  std::vector<uint8_t> b;
  uint64_t kvs = 0;
  template <typename T>
  void put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void key(const std::string& k, uint32_t type) {
    str(k);
    put<uint32_t>(type);
    ++kvs;
  }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8), str(v); }
  void kv_u32(const std::string& k, uint32_t v) { key(k, 4), put<uint32_t>(v); }
  void kv_strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9), put<uint32_t>(8), put<uint64_t>(v.size());
    for (const auto& s : v) str(s);
  }
  std::string write(const std::string& path) const {
    std::vector<uint8_t> out;
    TokenizerGguf head;
    head.put<uint32_t>(0x46554747), head.put<uint32_t>(3), head.put<uint64_t>(0), head.put<uint64_t>(kvs);
    out = head.b;
    out.insert(out.end(), b.begin(), b.end());
    while (out.size() % 32) out.push_back(0);
    write_bytes(path, out);
    return path;
  }
};

TEST(TokenizerLoading, BadGgufTokenizerKeysAreNamed) {
  const std::string dir = temp_dir("tokload_gguf");
  const std::vector<std::string> tokens = {"a", "b", "ab", "<s>"};
  {
    TokenizerGguf g;
    g.kv_str("tokenizer.ggml.model", "gpt2");
    g.kv_u32("tokenizer.ggml.tokens", 7);  // wrong type
    const GgufFile f(g.write(dir + "/wrong_type.gguf"));
    expect_error([&] { gguf_tokenizer_metadata(f); }, "'tokenizer.ggml.tokens' is u32, wanted array[string]");
  }
  {
    TokenizerGguf g;
    g.kv_strings("tokenizer.ggml.tokens", tokens);
    g.kv_strings("tokenizer.ggml.merges", {"a b"});
    const GgufFile f(g.write(dir + "/no_model.gguf"));
    expect_error([&] { gguf_tokenizer_metadata(f); }, "no metadata key 'tokenizer.ggml.model'");
  }
  {
    TokenizerGguf g;
    g.kv_str("tokenizer.ggml.model", "gpt2");
    g.kv_strings("tokenizer.ggml.tokens", tokens);
    g.kv_strings("tokenizer.ggml.merges", {"a b"});
    g.kv_u32("tokenizer.ggml.bos_token_id", 9);  // outside the 4 tokens
    const std::string path = g.write(dir + "/bad_bos.gguf");
    const std::string msg = expect_error([&] { tokenizer_from_gguf(GgufFile(path)); }, "outside the vocabulary");
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  {
    TokenizerGguf g;  // a valid minimal byte-level tokenizer: "ab" merges to one id
    g.kv_str("tokenizer.ggml.model", "gpt2");
    g.kv_strings("tokenizer.ggml.tokens", tokens);
    g.kv_strings("tokenizer.ggml.merges", {"a b"});
    g.kv_u32("tokenizer.ggml.eos_token_id", 3);
    const GgufFile f(g.write(dir + "/ok.gguf"));
    ASSERT_TRUE(gguf_has_tokenizer(f));
    const Tokenizer tok = tokenizer_from_gguf(f);
    EXPECT_EQ(tok.encode("abba", false), (std::vector<int32_t>{2, 1, 0}));
    EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{3});
  }
}

}  // namespace
}  // namespace conveyor::testing
