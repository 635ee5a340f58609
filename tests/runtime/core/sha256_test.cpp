// SHA-256 (the batch manifest's input digest) against FIPS 180-4 vectors, and chunked updates and
// whole files equal to the one-shot digest on random bytes.
#include "runtime/core/sha256.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "tests/support/test_support.h"

namespace conveyor {
namespace {

TEST(Sha256, MatchesFipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkedUpdatesEqualOneShot) {
  std::mt19937 rng(3);
  std::string data(10007, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  std::string want = sha256_hex(data);
  for (size_t chunk : {1u, 63u, 64u, 65u, 1000u}) {
    Sha256 h;
    for (size_t i = 0; i < data.size(); i += chunk) h.update(data.substr(i, chunk));
    EXPECT_EQ(h.hex_digest(), want) << "chunk " << chunk;
  }
  std::string path = testing::temp_dir("sha256") + "/f.bin";
  std::ofstream(path, std::ios::binary) << data;
  EXPECT_EQ(sha256_file(path), want);
}

}  // namespace
}  // namespace conveyor
