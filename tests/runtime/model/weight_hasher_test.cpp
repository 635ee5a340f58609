// WeightHasher: digests split over 1, 2 or 3 "ranks" (hashers with their rank and world, combined by
// assemble_weight_digests) equal each file's digest_file; a published SHA-256 that does not match is
// thrown by wait() of the rank that checks that file.
#include "runtime/model/weight_hasher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

TEST(WeightHasher, AnySplitOverRanksGivesTheFileDigests) {
  const std::string model = testing::data_path("formats/tiny_llama_sharded");
  for (int world : {1, 2, 3}) {
    std::vector<std::unique_ptr<WeightHasher>> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<WeightHasher>(model, r, world, 2));
    std::vector<std::vector<uint64_t>> words;
    for (auto& h : ranks) words.push_back(h->wait());
    std::vector<WeightFileInfo> files = assemble_weight_digests(ranks[0]->files(), words);
    ASSERT_GE(files.size(), 2u);
    for (const WeightFileInfo& f : files) EXPECT_EQ(f.digest, digest_file(f.path)) << f.path << ", world " << world;
  }
}

TEST(WeightHasher, PublishedChecksumMismatchIsThrownByItsRank) {
  std::string dir = testing::temp_dir("weight_hasher_sums");
  for (const auto& e : fs::directory_iterator(testing::data_path("formats/tiny_llama_sharded")))
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string());
  std::vector<WeightFileInfo> files = list_weight_files(dir);
  ASSERT_GE(files.size(), 2u);
  std::string second = fs::path(files[1].path).filename().string();
  std::ofstream(dir + "/SHA256SUMS") << std::string(64, 'a') << "  " << second << "\n";
  WeightHasher rank0(dir, 0, 2, 1), rank1(dir, 1, 2, 1);
  EXPECT_NO_THROW(rank0.wait());  // checks file 0, which SHA256SUMS does not list
  try {
    rank1.wait();
    FAIL() << "a wrong published digest passed";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("weight file '" + files[1].path + "' is corrupt"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("says " + std::string(64, 'a')), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
