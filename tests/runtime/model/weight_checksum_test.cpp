// Published SHA-256 digests: sha256sum's format parsed (both separators, comments, CRLF, "./"),
// malformed lines refused naming the line; Hugging Face cache snapshots detected only for blobs named
// by a SHA-256; the source order (blob name, <file>.sha256, SHA256SUMS) and the mismatch message.
#include "runtime/model/weight_checksum.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "runtime/core/sha256.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

const std::string kA = "a3f1c2d4e5b60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00";
const std::string kB = "0000000000000000000000000000000000000000000000000000000000000001";

TEST(Sha256Sums, ParsesSha256sumOutput) {
  std::string text = "# published digests\n" + kA + "  model-00001.safetensors\n\n" + kB +
                     " *./model-00002.safetensors\r\n" + "A3F1C2D4E5B60718293A4B5C6D7E8F90112233445566778899AABBCCDDEEFF00  up.bin\n";
  auto m = parse_sha256sums(text, "SHA256SUMS");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("model-00001.safetensors"), kA);
  EXPECT_EQ(m.at("model-00002.safetensors"), kB);
  EXPECT_EQ(m.at("up.bin"), kA);  // lowercased
}

TEST(Sha256Sums, RefusesMalformedLinesNamingThem) {
  for (const std::string& bad : {kA.substr(0, 63) + "  x", kA + " x", kA + "\tx", std::string("zz") + kA.substr(2) + "  x"}) {
    try {
      parse_sha256sums(kA + "  ok\n" + bad + "\n", "/m/SHA256SUMS");
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("'/m/SHA256SUMS' line 2 is not"), std::string::npos) << e.message();
    }
  }
}

struct Cache {
  std::string root, snapshot_file, blob;
};

Cache make_cache(const std::string& name, const std::string& blob_name) {
  Cache c;
  c.root = testing::temp_dir(name) + "/hub/models--org--m";
  fs::create_directories(c.root + "/blobs");
  fs::create_directories(c.root + "/snapshots/abc123/sub");
  c.blob = c.root + "/blobs/" + blob_name;
  std::ofstream(c.blob) << "weights";
  c.snapshot_file = c.root + "/snapshots/abc123/model.safetensors";
  fs::create_symlink("../../blobs/" + blob_name, c.snapshot_file);
  return c;
}

TEST(HfCache, DetectsSnapshotFilesNamedBySha256) {
  Cache c = make_cache("hf_cache", kA);
  EXPECT_EQ(hf_cache_blob_sha256(c.snapshot_file), kA);
  // A file in a subfolder of the snapshot links one level further up.
  std::string nested = c.root + "/snapshots/abc123/sub/w.bin";
  fs::create_symlink("../../../blobs/" + kA, nested);
  EXPECT_EQ(hf_cache_blob_sha256(nested), kA);
  // The blob itself, a regular file, and a git blob named by sha1 carry no digest to check.
  EXPECT_FALSE(hf_cache_blob_sha256(c.blob).has_value());
  Cache sha1 = make_cache("hf_cache_sha1", "0123456789abcdef0123456789abcdef01234567");
  EXPECT_FALSE(hf_cache_blob_sha256(sha1.snapshot_file).has_value());
  // A symlink to a 64-hex name outside a cache layout is not taken for one.
  std::string dir = testing::temp_dir("hf_not_cache");
  std::ofstream(dir + "/" + kA) << "x";
  fs::create_symlink(kA, dir + "/link");
  EXPECT_FALSE(hf_cache_blob_sha256(dir + "/link").has_value());
}

TEST(ExpectedSha256, PrefersBlobNameThenSidecarThenSums) {
  std::string dir = testing::temp_dir("expected_sha256");
  std::string file = dir + "/model.gguf";
  std::ofstream(file) << "weights";
  EXPECT_FALSE(expected_sha256(file).has_value());
  std::ofstream(dir + "/SHA256SUMS") << kB << "  other.gguf\n";
  EXPECT_FALSE(expected_sha256(file).has_value());  // no entry for this file
  std::ofstream(dir + "/SHA256SUMS", std::ios::app) << kB << "  model.gguf\n";
  ASSERT_TRUE(expected_sha256(file).has_value());
  EXPECT_EQ(expected_sha256(file)->hex, kB);
  EXPECT_EQ(expected_sha256(file)->source, dir + "/SHA256SUMS");
  std::ofstream(file + ".sha256") << kA << "  model.gguf\n";
  EXPECT_EQ(expected_sha256(file)->hex, kA);
  Cache c = make_cache("expected_sha256_hub", kB);
  EXPECT_EQ(expected_sha256(c.snapshot_file)->hex, kB);
  EXPECT_EQ(expected_sha256(c.snapshot_file)->source, "the name of its Hugging Face cache blob");
}

TEST(ExpectedSha256, VerifyNamesFileAndBothDigests) {
  std::string dir = testing::temp_dir("verify_sha256");
  std::string file = dir + "/w.bin";
  std::ofstream(file) << "some weights";
  std::string actual = sha256_hex("some weights");
  EXPECT_NO_THROW(verify_sha256(file, {actual, "SHA256SUMS"}));
  try {
    verify_sha256(file, {kA, dir + "/SHA256SUMS"});
    FAIL() << "a wrong digest passed";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("weight file '" + file + "' is corrupt or not the published file: its SHA-256 is " +
                               actual + " but " + dir + "/SHA256SUMS says " + kA),
              std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace conveyor
