// Normalizer and pre-tokenizer steps of an HF-style tokenizer pipeline, applied to the text between
// added tokens: Prepend/Replace normalizers; Split (regex, all five HF behaviours), Digits, ByteLevel
// and Metaspace pre-tokenizers. Steps run in order and each one splits the pieces the last one made;
// empty pieces are dropped, as HF does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/regex.h"

namespace conveyor {

class Normalizer {
 public:
  void add_prepend(const std::string& prefix);
  void add_replace(std::shared_ptr<const Regex> pattern, const std::string& content);
  bool empty() const { return steps_.empty(); }
  std::string apply(const std::string& text) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> pattern;  // null: prepend `content`
    std::string content;
  };
  std::vector<Step> steps_;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
enum class PrependScheme { kAlways, kFirst, kNever };

SplitBehavior parse_split_behavior(const std::string& name, const std::string& origin);
PrependScheme parse_prepend_scheme(const std::string& name, const std::string& origin);

// The GPT-2 split regex that HF's ByteLevel pre-tokenizer uses when use_regex is on.
const std::string& gpt2_split_pattern();

class PreTokenizer {
 public:
  void add_split(std::shared_ptr<const Regex> pattern, SplitBehavior behavior, bool invert);
  void add_digits(bool individual);
  void add_byte_level(bool add_prefix_space, bool use_regex);
  void add_metaspace(const std::string& replacement, PrependScheme scheme, bool split);

  // Whether a ByteLevel step maps pieces to the byte alphabet (the model's vocabulary is then in it).
  bool byte_level() const { return byte_level_; }

  // Appends the pieces of one segment of text. `at_text_start`: the segment begins at offset 0 of the
  // input, which Metaspace's "first" prepend scheme asks about.
  void run(const std::string& segment, bool at_text_start, std::vector<std::string>& pieces) const;

 private:
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> pattern;  // Split, ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement;        // Metaspace
    PrependScheme scheme = PrependScheme::kAlways;
    bool split = false;  // Metaspace
  };
  struct Piece {
    std::string text;
    bool at_start;
  };
  static void split_piece(const Step& step, const Piece& piece, std::vector<Piece>& out);
  static void apply_step(const Step& step, std::vector<Piece>& pieces);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace conveyor
