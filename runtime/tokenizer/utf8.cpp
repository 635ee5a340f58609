// UTF-8 validation and lossy conversion (see runtime/tokenizer/utf8.h). The replacement rule follows the
// Unicode "maximal subpart" practice, which is what from_utf8_lossy implements.
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

// How many bytes of a valid prefix of a character start at s[pos] (>= 1 when the lead byte is a
// valid lead), and the full length that character needs. Returns need = 0 for an invalid lead.
void utf8_prefix(const std::string& s, size_t pos, size_t& have, size_t& need) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  have = 0;
  need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 < 0x80) {
    have = need = 1;
    return;
  }
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return;
  }
  have = 1;
  for (size_t i = 1; i < need && pos + i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
    ++have;
  }
}

}  // namespace

size_t utf8_valid_char_len(const std::string& s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t have = 0, need = 0;
  utf8_prefix(s, pos, have, need);
  return need != 0 && have == need ? need : 0;
}

size_t utf8_first_invalid(const std::string& s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t n = utf8_valid_char_len(s, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::string::npos;
}

char32_t utf8_next(const std::string& s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n && pos + i < s.size(); ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  }
  pos += n;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string Utf8Settler::push(const std::string& bytes) {
  pending_ += bytes;
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    size_t have = 0, need = 0;
    utf8_prefix(pending_, pos, have, need);
    if (need != 0 && have == need) {
      out.append(pending_, pos, need);
      pos += need;
    } else if (need != 0 && pos + have == pending_.size()) {
      break;  // a valid start cut off by the end: more bytes may complete it
    } else {
      out += kReplacementChar;  // a maximal invalid subpart: the valid prefix, or one bad byte
      pos += have == 0 ? 1 : have;
    }
  }
  pending_.erase(0, pos);
  return out;
}

std::string Utf8Settler::finish() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacementChar);
  pending_.clear();
  return out;
}

std::string utf8_lossy(const std::string& bytes) {
  Utf8Settler settler;
  std::string out = settler.push(bytes);
  out += settler.finish();
  return out;
}

}  // namespace conveyor
