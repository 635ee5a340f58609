// The byte <-> code point tables of the byte-level alphabet (see runtime/tokenizer/byte_level.h), built once.
#include "runtime/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

constexpr char32_t kMaxAlphabetCp = 0x144;  // 256 + the 68 bytes that are not printable

struct ByteTables {
  std::array<std::string, 256> encoded;           // byte -> UTF-8 of its character
  std::array<int16_t, kMaxAlphabetCp> decoded{};  // code point -> byte, -1 when not in the alphabet

  ByteTables() {
    decoded.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      utf8_append(encoded[b], cp);
      decoded[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

std::string byte_level_encode(const std::string& bytes) {
  const ByteTables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.encoded[static_cast<unsigned char>(c)];
  return out;
}

bool byte_level_decode(const std::string& token, std::string& out) {
  const ByteTables& t = tables();
  std::string bytes;
  size_t pos = 0;
  while (pos < token.size()) {
    if (utf8_valid_char_len(token, pos) == 0) return false;
    const char32_t cp = utf8_next(token, pos);
    if (cp >= kMaxAlphabetCp || t.decoded[cp] < 0) return false;
    bytes += static_cast<char>(t.decoded[cp]);
  }
  out += bytes;
  return true;
}

}  // namespace conveyor
