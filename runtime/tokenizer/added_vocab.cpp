// Added-token matching (see runtime/tokenizer/added_vocab.h). Candidates are indexed by first byte and kept
// longest first, so the scan finds the leftmost-longest match in one pass over the text.
#include "runtime/tokenizer/added_vocab.h"

#include <algorithm>
#include <cctype>

#include "runtime/core/error.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

// HF's notion of whitespace for lstrip/rstrip (Rust char::is_whitespace, ASCII and Unicode spaces).
size_t whitespace_len_at(const std::string& s, size_t pos) {
  const size_t n = utf8_valid_char_len(s, pos);
  if (n == 0) return 0;
  size_t p = pos;
  const char32_t c = utf8_next(s, p);
  const bool ws = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
                  (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
                  c == 0x3000;
  return ws ? n : 0;
}

// Start of the run of whitespace that ends at `end`.
size_t whitespace_run_start(const std::string& s, size_t end) {
  size_t start = end;
  while (start > 0) {
    size_t b = start - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    if (whitespace_len_at(s, b) != start - b) break;
    start = b;
  }
  return start;
}

size_t whitespace_run_end(const std::string& s, size_t begin) {
  size_t end = begin;
  while (end < s.size()) {
    const size_t n = whitespace_len_at(s, end);
    if (n == 0) break;
    end += n;
  }
  return end;
}

// A word character next to a single_word token blocks the match (alphanumeric or '_').
bool is_word_byte_boundary(const std::string& s, size_t pos_before, bool before) {
  if (before) {
    if (pos_before == 0) return false;
    const auto c = static_cast<unsigned char>(s[pos_before - 1]);
    return c >= 0x80 || std::isalnum(c) || c == '_';
  }
  if (pos_before >= s.size()) return false;
  const auto c = static_cast<unsigned char>(s[pos_before]);
  return c >= 0x80 || std::isalnum(c) || c == '_';
}

}  // namespace

void AddedVocab::add(const AddedToken& token) {
  CONVEYOR_CHECK(!token.content.empty(), "added token with id ", token.id, " has empty content");
  auto it = by_content_.find(token.content);
  if (it != by_content_.end()) {  // a later definition replaces an earlier one, as HF does
    tokens_[it->second] = token;
    by_id_[token.id] = it->second;
    return;
  }
  const size_t index = tokens_.size();
  tokens_.push_back(token);
  by_id_[token.id] = index;
  by_content_[token.content] = index;
  auto& bucket = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  bucket.push_back(index);
  std::stable_sort(bucket.begin(), bucket.end(),
                   [&](size_t a, size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

const AddedToken* AddedVocab::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocab::find_content(const std::string& content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocab::longest_at(const std::string& text, size_t pos, bool normalized,
                                         bool parse_special) const {
  for (size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const AddedToken& t = tokens_[index];
    if (t.normalized != normalized || (t.special && !parse_special)) continue;
    if (text.compare(pos, t.content.size(), t.content) == 0) return &t;
  }
  return nullptr;
}

std::vector<TextSegment> AddedVocab::split(const std::string& text, bool normalized, bool parse_special) const {
  std::vector<TextSegment> out;
  size_t emitted = 0;  // end of what is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* t = longest_at(text, pos, normalized, parse_special);
    if (t == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + t->content.size();
    pos = end;
    if (t->single_word && (is_word_byte_boundary(text, begin, true) || is_word_byte_boundary(text, end, false))) {
      continue;  // HF skips the whole match and goes on after it
    }
    if (t->lstrip) begin = std::max(whitespace_run_start(text, begin), emitted);
    if (t->rstrip) end = whitespace_run_end(text, end);
    if (emitted < begin) out.push_back({emitted, begin, -1});
    out.push_back({begin, end, t->id});
    emitted = end;
    pos = std::max(pos, end);
  }
  if (emitted < text.size()) out.push_back({emitted, text.size(), -1});
  return out;
}

}  // namespace conveyor
