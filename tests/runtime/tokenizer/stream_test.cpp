// StreamDecoder: pieces are always valid UTF-8 and concatenate to decode(); checked on the corpus
// and on random id sequences (which cut characters and make invalid byte runs) for both tokenizer
// kinds. Plus the UTF-8 lossy rule, long-piece BPE cost, and error messages of the loaders.
#include <chrono>
#include <random>

#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/runtime/tokenizer/tokenizer_test_util.h"

namespace conveyor::testing {
namespace {

bool valid_utf8(const std::string& s) { return utf8_first_invalid(s) == std::string::npos; }

// Streams `ids`; returns "" or what went wrong.
std::string check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  StreamDecoder stream(tok, skip_special);
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = stream.step(ids[i]);
    if (!valid_utf8(piece)) return "step " + std::to_string(i) + " returned invalid UTF-8";
    joined += piece;
  }
  const std::string tail = stream.flush();
  if (!valid_utf8(tail)) return "flush returned invalid UTF-8";
  joined += tail;
  const std::string full = tok.decode(ids, skip_special);
  if (joined != full) return "stream " + nlohmann::json(joined).dump() + " != decode " + nlohmann::json(full).dump();
  return "";
}

void stream_corpus_and_random(const Tokenizer& tok, const std::string& label) {
  size_t ok = 0, total = 0;
  for (const std::string& s : load_corpus()) {
    for (bool skip : {false, true}) {
      const std::string err = check_stream(tok, tok.encode(s, true), skip);
      ++total;
      ok += err.empty();
      EXPECT_EQ(err, "") << label << ": " << nlohmann::json(s).dump();
    }
  }
  // Random ids: split characters, lone continuation bytes, specials in between.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 40);
    for (int32_t& id : ids) id = any(rng);
    const std::string err = check_stream(tok, ids, trial % 2 == 0);
    ++total;
    ok += err.empty();
    EXPECT_EQ(err, "") << label << ": ids " << show_ids(ids);
  }
  std::printf("[agreement] %s stream == decode: %zu/%zu\n", label.c_str(), ok, total);
}

TEST(TokenizerStream, ByteLevelStreamsCompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_json_file(cached_file("smollm2_tokenizer.json"));
  stream_corpus_and_random(tok, "SmolLM2");
  // "龘" is three byte-level tokens here: nothing comes out until the last one.
  const auto ids = tok.encode("\xE9\xBE\x98", false);
  ASSERT_EQ(ids.size(), 3u);
  StreamDecoder stream(tok, false);
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(stream.step(ids[i]), "");
  EXPECT_EQ(stream.step(ids.back()), "\xE9\xBE\x98");
  EXPECT_EQ(stream.flush(), "");
}

TEST(TokenizerStream, CutCharacterFlushesAsReplacement) {
  const Tokenizer tok = Tokenizer::from_json_file(cached_file("smollm2_tokenizer.json"));
  auto ids = tok.encode("a\xF0\x9F\x9A\x80", false);  // "a🚀"
  ASSERT_GT(ids.size(), 2u);
  ids.pop_back();  // the rocket loses its last byte(s)
  StreamDecoder stream(tok, false);
  std::string out;
  for (int32_t id : ids) out += stream.step(id);
  EXPECT_EQ(out, "a");
  EXPECT_EQ(stream.flush(), kReplacementChar);
  EXPECT_EQ(tok.decode(ids, false), std::string("a") + kReplacementChar);
}

TEST(TokenizerStream, SentencePieceStreamsCompleteCharacters) {
  const Tokenizer tok = Tokenizer::from_json_file(data_path("tokenizer/sp_bpe.json"));
  stream_corpus_and_random(tok, "SentencePiece-style");
  const Tokenizer gguf = Tokenizer::from_gguf_metadata(load_gguf_metadata(data_path("tokenizer/sp_bpe_gguf_meta.json")));
  stream_corpus_and_random(gguf, "SentencePiece-style (GGUF)");
}

// HF's decode of random id sequences (cut characters, stray bytes, byte-fallback groups that are not
// UTF-8, specials): our decode must give the same text, also when streamed.
void check_random_decode(const Tokenizer& tok, const std::string& name, const std::string& label) {
  size_t ok = 0, total = 0;
  for (const std::string& line : read_lines(data_path("tokenizer/" + name))) {
    const auto j = nlohmann::json::parse(line);
    const auto ids = j.at("ids").get<std::vector<int32_t>>();
    for (bool skip : {true, false}) {
      const std::string want = j.at(skip ? "decoded" : "decoded_special").get<std::string>();
      const std::string got = tok.decode(ids, skip);
      ++total;
      ok += got == want && check_stream(tok, ids, skip).empty();
      EXPECT_EQ(got, want) << label << " ids " << show_ids(ids) << " skip_special " << skip;
    }
  }
  std::printf("[agreement] %s random-id decode: %zu/%zu\n", label.c_str(), ok, total);
  EXPECT_EQ(ok, total);
}

TEST(TokenizerStream, RandomIdsDecodeLikeHF) {
  check_random_decode(Tokenizer::from_json_file(cached_file("smollm2_tokenizer.json")), "smollm2_decode_random.jsonl",
                      "SmolLM2 tokenizer.json");
  check_random_decode(Tokenizer::from_gguf_metadata(load_gguf_metadata(cached_file("smollm2_gguf_tokenizer.json"))),
                      "smollm2_decode_random.jsonl", "SmolLM2 GGUF metadata");
  check_random_decode(Tokenizer::from_json_file(data_path("tokenizer/sp_bpe.json")), "sp_bpe_decode_random.jsonl",
                      "SentencePiece-style tokenizer.json");
  check_random_decode(
      Tokenizer::from_gguf_metadata(load_gguf_metadata(data_path("tokenizer/sp_bpe_gguf_meta.json"))),
      "sp_bpe_decode_random.jsonl", "SentencePiece-style GGUF metadata");
}

TEST(TokenizerUtf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("ab"), "ab");
  EXPECT_EQ(utf8_lossy("\xE4\xB8"), kReplacementChar);                                   // cut-off: one
  EXPECT_EQ(utf8_lossy("\xE4\xB8x"), std::string(kReplacementChar) + "x");
  EXPECT_EQ(utf8_lossy("\x80\x80"), std::string(kReplacementChar) + kReplacementChar);   // each stray byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), std::string(kReplacementChar) + kReplacementChar + kReplacementChar);
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), std::string(kReplacementChar) + kReplacementChar);   // overlong
  Utf8Settler s;
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.push("\x9A"), "");
  EXPECT_EQ(s.push("\x80!"), "\xF0\x9F\x9A\x80!");
  EXPECT_EQ(s.finish(), "");
}

// A piece of 200,000 characters with no split point must not take quadratic time.
TEST(TokenizerBpe, LongPieceIsNotQuadratic) {
  const Tokenizer tok = Tokenizer::from_json_file(data_path("tokenizer/sp_bpe.json"));
  std::mt19937 rng(7);
  std::string text;
  const char* letters = "abcdefghijklmnopqrstuvwxyz";
  for (int i = 0; i < 200000; ++i) text += letters[rng() % 26];
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, false);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(sec, 5.0);
  EXPECT_EQ(tok.decode(ids, true), text);
}

TEST(TokenizerErrors, MessagesSayWhatAndWhere) {
  const Tokenizer tok = Tokenizer::from_json_file(data_path("tokenizer/sp_bpe.json"));
  try {
    tok.encode("ok \xFF bad", false);
    FAIL() << "invalid UTF-8 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte 3"), std::string::npos) << e.what();
  }
  const std::string bad_pre =
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}})";
  try {
    Tokenizer::from_json_string(bad_pre, "x/tokenizer.json");
    FAIL() << "an unsupported pre-tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/tokenizer.json: pre_tokenizer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Whitespace"), std::string::npos) << e.what();
  }
  const std::string bad_merge = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})";
  EXPECT_THROW(Tokenizer::from_json_string(bad_merge, "m.json"), Error);
  GgufTokenizerMetadata meta = load_gguf_metadata(data_path("tokenizer/sp_bpe_gguf_meta.json"));
  meta.model = "gpt2";
  meta.pre = "smolm";
  meta.merges = {"a b"};
  try {
    Tokenizer::from_gguf_metadata(meta);
    FAIL() << "an unknown pre was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'smollm'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace conveyor::testing
