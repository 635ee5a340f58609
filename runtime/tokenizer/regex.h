// PCRE2 (UTF + UCP, JIT when available) regexes for pre-tokenizers: Unicode classes (\p{L}, \p{N}),
// lookahead (\s+(?!\S)) and inline case-insensitive groups. A compiled Regex is immutable and may be
// used from several threads at once (match data and the JIT stack are per thread).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace conveyor {

class Regex {
 public:
  // Throws conveyor::Error naming `origin` (where the pattern came from) and the offset on a bad pattern.
  Regex(const std::string& pattern, const std::string& origin);

  // Non-empty, non-overlapping matches [begin, end) in byte offsets, left to right. `text` must be
  // valid UTF-8 (the tokenizer validates input once).
  std::vector<std::pair<size_t, size_t>> find_all(const std::string& text) const;

  const std::string& pattern() const { return pattern_; }

  // A pattern matching `literal` exactly (for HF Split / Replace with a String pattern).
  static std::string escape(const std::string& literal);

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace conveyor
