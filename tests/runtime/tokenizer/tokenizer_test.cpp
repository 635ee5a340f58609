// Exact agreement with HF `tokenizers` on the whole corpus (tests/data/tokenizer): SmolLM2 from its
// tokenizer.json and from the real GGUF file read by our GGUF reader, our SentencePiece-style tokenizer
// from its tokenizer.json and from GGUF-style metadata. Every id of every string is compared; decode
// is checked too.
#include <gtest/gtest.h>

#include "runtime/model/gguf_file.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace conveyor::testing {
namespace {

// Compares encode (with and without special handling) and decode on every string; prints the
// agreement numbers and the first mismatches.
void check_corpus(const Tokenizer& tok, const std::string& expected_name, const std::string& label) {
  std::vector<std::string> corpus;
  const auto expected = load_expected(expected_name, load_corpus(), corpus);
  size_t ids_ok = 0, plain_ok = 0, dec_ok = 0, dec_special_ok = 0, shown = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const Expected& e = expected[i];
    const auto ids = tok.encode(corpus[i], /*add_bos=*/true);
    const auto plain = tok.encode(corpus[i], /*add_bos=*/false, /*parse_special=*/false);
    const std::string dec = tok.decode(e.ids, /*skip_special=*/true);
    const std::string dec_special = tok.decode(e.ids, /*skip_special=*/false);
    ids_ok += ids == e.ids;
    plain_ok += plain == e.plain;
    dec_ok += dec == e.decoded;
    dec_special_ok += dec_special == e.decoded_special;
    const bool same = ids == e.ids && plain == e.plain && dec == e.decoded && dec_special == e.decoded_special;
    if (!same && shown++ < 5) {
      ADD_FAILURE() << label << " string " << i << ": " << nlohmann::json(corpus[i]).dump() << "\n  ids  got "
                    << show_ids(ids) << "\n       want " << show_ids(e.ids) << "\n  plain got " << show_ids(plain)
                    << "\n       want " << show_ids(e.plain) << "\n  decode got " << nlohmann::json(dec).dump()
                    << " want " << nlohmann::json(e.decoded).dump() << "\n  decode(special) got "
                    << nlohmann::json(dec_special).dump() << " want " << nlohmann::json(e.decoded_special).dump();
    }
  }
  const size_t n = corpus.size();
  std::printf("[agreement] %s: ids %zu/%zu, plain ids %zu/%zu, decode %zu/%zu, decode(special) %zu/%zu\n",
              label.c_str(), ids_ok, n, plain_ok, n, dec_ok, n, dec_special_ok, n);
  EXPECT_EQ(ids_ok, n);
  EXPECT_EQ(plain_ok, n);
  EXPECT_EQ(dec_ok, n);
  EXPECT_EQ(dec_special_ok, n);
}

TEST(Tokenizer, SmolLM2FromTokenizerJsonMatchesHF) {
  const Tokenizer tok = Tokenizer::from_json_file(cached_file("smollm2_tokenizer.json"));
  EXPECT_EQ(tok.kind(), "byte-level BPE");
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.token_to_id("<|im_start|>").value_or(-1), 1);
  EXPECT_TRUE(tok.is_special(2));
  check_corpus(tok, "smollm2_expected.jsonl", "SmolLM2 tokenizer.json");
}

// The real SmolLM2 GGUF through GgufFile and gguf_tokenizer_metadata (no Python-side dump involved).
TEST(Tokenizer, SmolLM2FromGgufFileMatchesHF) {
  const std::string path = test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  const Tokenizer tok = tokenizer_from_gguf(GgufFile(path));
  EXPECT_EQ(tok.kind(), "byte-level BPE");
  EXPECT_EQ(tok.vocab_size(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{2});
  check_corpus(tok, "smollm2_expected.jsonl", "SmolLM2 GGUF file (our reader)");
}

TEST(Tokenizer, SentencePieceFromTokenizerJsonMatchesHF) {
  const Tokenizer tok = Tokenizer::from_json_file(data_path("tokenizer/sp_bpe.json"));
  EXPECT_EQ(tok.kind(), "sentencepiece BPE");
  EXPECT_EQ(tok.bos_id(), 1);
  check_corpus(tok, "sp_bpe_expected.jsonl", "SentencePiece-style tokenizer.json");
}

TEST(Tokenizer, SentencePieceFromGgufMetadataMatchesHF) {
  const Tokenizer tok = Tokenizer::from_gguf_metadata(load_gguf_metadata(data_path("tokenizer/sp_bpe_gguf_meta.json")));
  EXPECT_EQ(tok.kind(), "sentencepiece BPE");
  EXPECT_EQ(tok.bos_id(), 1);
  check_corpus(tok, "sp_bpe_gguf_expected.jsonl", "SentencePiece-style GGUF metadata (merges from scores)");
}

// Llama-3 split regex (case-insensitive contractions, \p{N}{1,3}, \s*[\r\n]+), ignore_merges, added
// tokens with lstrip / rstrip / single_word / normalized, and a template adding BOS and EOS.
TEST(Tokenizer, Llama3StyleVariantMatchesHF) {
  const Tokenizer tok = Tokenizer::from_json_string(
      patched_tokenizer_json(cached_file("smollm2_tokenizer.json"), data_path("tokenizer/variant_llama3_style.json")),
      "SmolLM2 + variant_llama3_style.json");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{2});
  check_corpus(tok, "variant_llama3_style_expected.jsonl", "Llama-3-style variant");
}

// Metaspace pre-tokenizer (prepend always, split on), Digits runs, and the Metaspace decoder.
TEST(Tokenizer, MetaspaceVariantMatchesHF) {
  const Tokenizer tok = Tokenizer::from_json_string(
      patched_tokenizer_json(data_path("tokenizer/sp_bpe.json"), data_path("tokenizer/variant_metaspace.json")),
      "sp_bpe.json + variant_metaspace.json");
  check_corpus(tok, "variant_metaspace_expected.jsonl", "Metaspace variant");
}

// tokenizer.ggml.pre "llama-bpe" maps to the Llama-3 regex (SmolLM2's vocabulary under it).
TEST(Tokenizer, GgufPreLlamaBpeMatchesHF) {
  const std::string path = test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  GgufTokenizerMetadata meta = gguf_tokenizer_metadata(GgufFile(path));
  meta.pre = "llama-bpe";
  check_corpus(Tokenizer::from_gguf_metadata(meta), "smollm2_gguf_pre_llama-bpe_expected.jsonl", "GGUF pre llama-bpe");
}

// Byte-level BPE loses nothing: decode(encode(s)) == s for every string, specials parsed or not.
TEST(Tokenizer, ByteLevelRoundTripsTheCorpus) {
  const Tokenizer tok = Tokenizer::from_json_file(cached_file("smollm2_tokenizer.json"));
  size_t ok = 0;
  const auto corpus = load_corpus();
  for (const std::string& s : corpus) {
    const bool same = tok.decode(tok.encode(s, true), false) == s && tok.decode(tok.encode(s, false, false), false) == s;
    ok += same;
    EXPECT_TRUE(same) << nlohmann::json(s).dump();
  }
  std::printf("[agreement] SmolLM2 round trip: %zu/%zu\n", ok, corpus.size());
}

}  // namespace
}  // namespace conveyor::testing
