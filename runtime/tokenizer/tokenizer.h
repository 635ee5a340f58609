// Text <-> token ids for the models conveyor runs: byte-level BPE (GPT-2 / Llama 3 / Qwen2 / SmolLM2)
// and SentencePiece-style BPE with byte fallback (Llama 2 / Mistral), loaded from an HF tokenizer.json
// or from GGUF tokenizer metadata. Ids agree exactly with HF `tokenizers` on the same definition.
// A Tokenizer is immutable after loading (cheap to copy, shared state) and safe to use from several
// threads; a StreamDecoder belongs to one sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

// The tokenizer.ggml.* keys of a GGUF file, filled by the GGUF reader (keys without the prefix).
struct GgufTokenizerMetadata {
  std::string model;                 // "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE)
  std::string pre;                   // "smollm", "llama-bpe", "qwen2", "gpt2", "default", ... (gpt2 only)
  std::vector<std::string> tokens;   // id -> token, in the model's own spelling
  std::vector<int32_t> token_type;   // 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
  std::vector<float> scores;         // "llama": merge priority when `merges` is empty
  std::vector<std::string> merges;   // "a b", best first; may be empty for "llama"
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eot_ids;          // extra end ids (tokenizer.ggml.eot_token_id, eom, ...)
  std::optional<bool> add_bos_token;     // absent: true for "llama", false for "gpt2"
  std::optional<bool> add_space_prefix;  // absent: true ("llama" only)
};

class Tokenizer {
 public:
  // Throws conveyor::Error naming the file and the JSON key for anything unsupported or malformed.
  static Tokenizer from_json_file(const std::string& path);
  static Tokenizer from_json_string(const std::string& json, const std::string& origin);
  static Tokenizer from_gguf_metadata(const GgufTokenizerMetadata& meta);

  // `add_bos`: add the leading (and trailing) special tokens the tokenizer's post-processor or the GGUF
  // add_bos_token flag asks for (HF add_special_tokens); a tokenizer that asks for none adds none.
  // `parse_special`: special tokens written in the text (<|im_start|>) become their ids; off, they are
  // tokenized as plain text (for untrusted text). `text` must be valid UTF-8 (else Error with the offset).
  std::vector<int32_t> encode(const std::string& text, bool add_bos, bool parse_special = true) const;

  // Ids outside the vocabulary are skipped (as HF does: a model's padded vocabulary may sample them).
  // Invalid UTF-8 from byte tokens becomes U+FFFD, one per maximal invalid subpart.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;

  int32_t vocab_size() const;  // model vocabulary plus added tokens (max id + 1)
  int32_t bos_id() const;      // -1 when there is none
  const std::vector<int32_t>& eos_ids() const;
  std::optional<int32_t> token_to_id(const std::string& token) const;  // model or added token
  std::string id_to_token(int32_t id) const;                           // "" when out of range
  bool is_special(int32_t id) const;
  const std::string& kind() const;  // "byte-level BPE" or "sentencepiece BPE"

  // The loader sets these from config.json / generation_config.json, which tokenizer.json lacks.
  void set_bos_eos(int32_t bos_id, std::vector<int32_t> eos_ids);

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<Impl> impl);
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
  friend Tokenizer make_tokenizer(std::shared_ptr<Impl> impl);
};

// Decodes ids one at a time and returns only complete UTF-8: a character split over several tokens
// comes out whole once its last byte arrives. Concatenating every step() and the final flush() gives
// exactly decode(all ids). flush() ends the sequence: bytes still waiting (a cut-off character, or a
// byte-fallback group) come out as decode() would render them, i.e. U+FFFD for incomplete bytes.
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special);
  ~StreamDecoder();
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;

  std::string step(int32_t id);
  std::string flush();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace conveyor
