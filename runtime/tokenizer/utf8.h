// UTF-8 helpers for the tokenizer: stepping over characters, validation, and the lossy conversion
// that turns invalid bytes into U+FFFD the way Rust's String::from_utf8_lossy (and so HF `tokenizers`)
// does: one U+FFFD per maximal invalid subpart. Utf8Settler applies that conversion incrementally.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

inline constexpr const char* kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 character starting at s[pos], or 0 when the bytes there are not one
// (bad lead byte, bad continuation, overlong form, surrogate, > U+10FFFF, or cut off by the end).
size_t utf8_valid_char_len(const std::string& s, size_t pos);

// The first byte offset where s is not valid UTF-8, or npos.
size_t utf8_first_invalid(const std::string& s);

// Code point of the valid character at s[pos] (callers check validity first); advances pos.
char32_t utf8_next(const std::string& s, size_t& pos);

void utf8_append(std::string& out, char32_t cp);

// Lossy conversion, usable on a stream of bytes: push() returns the text that is settled (complete
// characters and invalid subparts already known to be invalid); a valid-so-far incomplete character
// at the end stays pending until more bytes come, and finish() turns it into one U+FFFD.
class Utf8Settler {
 public:
  std::string push(const std::string& bytes);
  std::string finish();

 private:
  std::string pending_;
};

// Whole-string lossy conversion; equals Utf8Settler push() + finish().
std::string utf8_lossy(const std::string& bytes);

}  // namespace conveyor
