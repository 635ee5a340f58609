// utf8_lossy, the one lossy UTF-8 conversion (tokenizer decoders, batch records, logprobs): one U+FFFD
// per maximal invalid subpart, and any bytes at all come out as text that dumps as JSON.
#include "runtime/tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace conveyor {
namespace {

using nlohmann::json;

TEST(Utf8Lossy, ReplacesMaximalInvalidSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x99\x82"), "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x99\x82");
  EXPECT_EQ(utf8_lossy("ab\xE6\x97"), "ab" + r);          // cut inside a 3-byte character
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x99"), r);               // cut inside a 4-byte character
  EXPECT_EQ(utf8_lossy("\xF0\x80x"), r + r + "x");         // F0 80 can never start a valid sequence
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), r + r + r);       // a surrogate
  EXPECT_EQ(utf8_lossy("\xC0\xAF\xFF"), r + r + r);       // overlong and never-valid bytes
}

TEST(Utf8Lossy, RandomBytesAlwaysDumpAsJson) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    std::string clean = utf8_lossy(s);
    std::string dumped;
    ASSERT_NO_THROW(dumped = json(clean).dump()) << "trial " << trial;
    EXPECT_EQ(json::parse(dumped).get<std::string>(), clean);
    EXPECT_EQ(utf8_lossy(clean), clean);  // idempotent: valid text is left alone
  }
}

}  // namespace
}  // namespace conveyor
