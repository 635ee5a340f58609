// Chunked XXH3-128 digests of weight files: the digest is XXH3-128 of the chunks' canonical digests,
// the same for any number of threads or any split of chunks, and changes with one flipped byte;
// the file list of a sharded checkpoint comes in a fixed order with sizes.
#include "runtime/model/weight_digest.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <fstream>
#include <random>

#include "runtime/model/mmap_file.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

std::string write_random(const std::string& path, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  std::ofstream(path, std::ios::binary) << bytes;
  return bytes;
}

// The scheme written out with the library directly, independent of the code under test.
std::string reference_digest(const std::string& bytes) {
  std::string cat;
  for (size_t at = 0; at < bytes.size() || at == 0; at += kDigestChunkBytes) {
    size_t n = std::min<size_t>(kDigestChunkBytes, bytes.size() - at);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data() + at, n));
    cat.append(reinterpret_cast<const char*>(c.digest), sizeof c.digest);
    if (bytes.empty()) break;
  }
  XXH128_hash_t h = XXH3_128bits(cat.data(), cat.size());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

TEST(WeightDigest, MatchesTheSchemeForAnyThreadCount) {
  std::string dir = testing::temp_dir("weight_digest");
  std::string path = dir + "/w.bin";
  std::string bytes = write_random(path, 2 * kDigestChunkBytes + 12345, 7);
  std::string want = reference_digest(bytes);
  EXPECT_EQ(want.size(), 32u);
  for (int threads : {1, 2, 3, 8}) EXPECT_EQ(digest_file(path, threads), want) << threads << " threads";
  EXPECT_EQ(digest_chunk_count(bytes.size()), 3u);

  // Chunks hashed in any order by anyone combine to the same digest.
  MappedFile m(path);
  std::vector<ChunkDigest> chunks(3);
  for (int c : {2, 0, 1}) chunks[c] = digest_chunk(m.data(), m.size(), c);
  EXPECT_EQ(combine_chunk_digests(chunks), want);
}

TEST(WeightDigest, OneFlippedByteChangesTheDigest) {
  std::string dir = testing::temp_dir("weight_digest_flip");
  std::string bytes = write_random(dir + "/a.bin", kDigestChunkBytes + 99, 11);
  bytes[kDigestChunkBytes + 50] ^= 1;
  std::ofstream(dir + "/b.bin", std::ios::binary) << bytes;
  EXPECT_NE(digest_file(dir + "/a.bin"), digest_file(dir + "/b.bin"));
  EXPECT_EQ(digest_file(dir + "/b.bin", 2), reference_digest(bytes));
}

TEST(WeightDigest, EmptyFileHasOneEmptyChunk) {
  std::string dir = testing::temp_dir("weight_digest_empty");
  std::ofstream(dir + "/e.bin").close();
  EXPECT_EQ(digest_chunk_count(0), 1u);
  EXPECT_EQ(digest_file(dir + "/e.bin"), reference_digest(""));
}

TEST(WeightDigest, ListsTheShardsOfACheckpointWithSizes) {
  std::vector<WeightFileInfo> files = list_weight_files(testing::data_path("formats/tiny_llama_sharded"));
  ASSERT_GE(files.size(), 2u);
  for (size_t i = 0; i < files.size(); ++i) {
    struct stat st {};
    ASSERT_EQ(::stat(files[i].path.c_str(), &st), 0) << files[i].path;
    EXPECT_EQ(files[i].size, static_cast<uint64_t>(st.st_size));
    EXPECT_TRUE(files[i].digest.empty());
    if (i > 0) {
      EXPECT_LT(files[i - 1].path, files[i].path);
    }
  }
  std::vector<ChunkRef> all = all_chunks(files);
  ASSERT_EQ(all.size(), files.size());  // small shards: one chunk each
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].file, i);
  std::vector<WeightFileInfo> one = list_weight_files(testing::data_path("formats/tiny_llama.gguf"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].path, testing::data_path("formats/tiny_llama.gguf"));
}

}  // namespace
}  // namespace conveyor
