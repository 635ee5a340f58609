// The parts of a Tokenizer, shared by the loaders (runtime/tokenizer/from_json.cpp, runtime/tokenizer/from_gguf.cpp), the
// pipeline (tokenizer.cpp) and the stream decoder. Internal to runtime/: include tokenizer.h instead.
// Invariant: after loading nothing here changes; a copy is made to change bos/eos.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/added_vocab.h"
#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/decoder.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace conveyor {

inline constexpr const char* kByteLevelBpe = "byte-level BPE";
inline constexpr const char* kSentencePieceBpe = "sentencepiece BPE";

struct Tokenizer::Impl {
  std::string kind;
  std::string origin;  // file or "GGUF metadata", for messages
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::shared_ptr<const BpeModel> model;
  AddedVocab added;
  DecoderSpec decoder;
  std::vector<int32_t> prefix_ids;  // what add_bos puts before the text (post-processor)
  std::vector<int32_t> suffix_ids;  // ... and after it
  int32_t bos_id = -1;
  std::vector<int32_t> eos_ids;

  // The token string the decoder sees for `id`, or nullptr when `id` is unknown or skipped.
  const std::string* decoder_token(int32_t id, bool skip_special) const;
};

Tokenizer make_tokenizer(std::shared_ptr<Tokenizer::Impl> impl);

}  // namespace conveyor
