// Added tokens (special ones like <|im_start|> and plain ones) that are matched whole in the text
// before any normalization or BPE, as HF `tokenizers` does: leftmost-longest match, with the
// lstrip / rstrip / single_word options. Tokens marked `normalized` are matched in normalized text.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace conveyor {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A stretch of text: either an added token (id >= 0) or text for the normal pipeline (id < 0).
struct TextSegment {
  size_t begin, end;  // bytes in the text that was split
  int32_t id;
};

class AddedVocab {
 public:
  void add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;
  const AddedToken* find_content(const std::string& content) const;

  // Splits `text` on the added tokens whose `normalized` flag equals `normalized`; special tokens are
  // skipped when `parse_special` is off (they are then plain text).
  std::vector<TextSegment> split(const std::string& text, bool normalized, bool parse_special) const;

 private:
  struct Match {
    size_t begin, end;
    const AddedToken* token;
  };
  // The longest eligible token starting at `pos`, or nullptr.
  const AddedToken* longest_at(const std::string& text, size_t pos, bool normalized, bool parse_special) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  std::vector<std::vector<size_t>> by_first_byte_ = std::vector<std::vector<size_t>>(256);  // longest first
};

}  // namespace conveyor
