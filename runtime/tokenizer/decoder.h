// Turns token strings back into text, incrementally, for the decoder chains HF tokenizer.json files
// use: ByteLevel (GPT-2 alphabet -> bytes), Replace, ByteFallback (<0xXX> groups), Fuse, Strip and
// Metaspace. decode() and StreamDecoder both run this one state machine, so streamed pieces always
// concatenate to the full decode.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/utf8.h"

namespace conveyor {

struct DecoderSpec {
  bool join_with_space = false;  // no decoder at all: HF joins tokens with " "
  bool byte_level = false;
  // Token-local rewrites in chain order: Replace (literal -> content) and Metaspace (replacement -> ' ').
  struct Rewrite {
    std::string from, to;
    bool drop_in_first_token = false;  // Metaspace with a prepend scheme: the first token loses them
  };
  std::vector<Rewrite> rewrites;
  bool byte_fallback = false;
  // Strip of `strip_content` repeated up to strip_start/strip_stop times; per token before Fuse,
  // once at the start of the whole text after Fuse (stop must then be 0).
  std::string strip_content;
  size_t strip_start = 0;
  size_t strip_stop = 0;
  bool strip_after_fuse = false;
};

class TokenDecoder {
 public:
  explicit TokenDecoder(const DecoderSpec& spec) : spec_(&spec), strip_left_(spec.strip_start) {}
  // Feeds one token string; returns the text that is settled (complete UTF-8).
  std::string push(const std::string& token);
  // Ends the sequence: returns what was still held back.
  std::string finish();

 private:
  std::string rewrite(const std::string& token) const;
  std::string flush_bytes();
  std::string emit(const std::string& bytes);

  const DecoderSpec* spec_;
  size_t index_ = 0;         // tokens seen
  std::string byte_group_;   // pending <0xXX> bytes
  Utf8Settler settler_;
  size_t strip_left_ = 0;
  bool started_ = false;     // some text was emitted (the after-Fuse strip is over)
};

}  // namespace conveyor
