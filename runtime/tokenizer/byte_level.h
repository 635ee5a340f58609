// The GPT-2 byte-level alphabet: every byte maps to one printable code point (printable Latin-1
// bytes to themselves, the rest to U+0100 and up), so byte-level BPE vocabularies are plain strings.
// The mapping is a bijection between the 256 bytes and 256 code points.
#pragma once

#include <string>

namespace conveyor {

// Each byte of `bytes` as its alphabet character, UTF-8 encoded.
std::string byte_level_encode(const std::string& bytes);

// The bytes a token spells when every character is in the alphabet; false (out untouched) otherwise.
bool byte_level_decode(const std::string& token, std::string& out);

}  // namespace conveyor
