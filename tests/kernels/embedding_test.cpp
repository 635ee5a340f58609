// Tests embedding_ref: rows gathered exactly, vocab-parallel shards sum to the full lookup, bad ids
// rejected with the token index in the message.
#include "kernels/cpu/embedding.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::random_floats;

std::vector<int32_t> random_ids(int n, int vocab, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = dist(rng);
  return ids;
}

TEST(EmbeddingRef, GathersRows) {
  const int vocab = 97, hidden = 40, tokens = 33;
  auto table = random_floats(static_cast<size_t>(vocab) * hidden, 1);
  auto ids = random_ids(tokens, vocab, 2);
  std::vector<float> out(static_cast<size_t>(tokens) * hidden, -7.f), want(out.size());
  for (int t = 0; t < tokens; ++t)
    for (int i = 0; i < hidden; ++i) want[t * hidden + i] = table[ids[t] * hidden + i];
  embedding_ref(out.data(), ids.data(), table.data(), tokens, hidden, vocab);
  EXPECT_EQ(compare_all(out, want, 0.f, 0.f), "");
}

TEST(EmbeddingRef, VocabShardsSumToFullLookup) {
  const int vocab = 101, hidden = 24, tokens = 50;
  auto table = random_floats(static_cast<size_t>(vocab) * hidden, 3);
  auto ids = random_ids(tokens, vocab, 4);
  ids[0] = 0;
  ids[1] = vocab - 1;
  std::vector<float> full(static_cast<size_t>(tokens) * hidden);
  embedding_ref(full.data(), ids.data(), table.data(), tokens, hidden, vocab);

  // Three uneven shards, as a vocab-parallel layer with padding would cut them.
  const int bounds[] = {0, 40, 80, vocab};
  std::vector<float> sum(full.size(), 0.f), part(full.size(), -3.f);
  for (int s = 0; s < 3; ++s) {
    const float* shard = table.data() + static_cast<size_t>(bounds[s]) * hidden;
    embedding_ref(part.data(), ids.data(), shard, tokens, hidden, vocab, bounds[s], bounds[s + 1]);
    for (int t = 0; t < tokens; ++t) {
      const bool mine = ids[t] >= bounds[s] && ids[t] < bounds[s + 1];
      for (int i = 0; i < hidden; ++i) {
        const float v = part[t * hidden + i];
        if (!mine) {
          ASSERT_EQ(v, 0.f) << "shard " << s << " token " << t << " should be zero";
        }
        sum[t * hidden + i] += v;
      }
    }
  }
  EXPECT_EQ(compare_all(sum, full, 0.f, 0.f), "");
}

TEST(EmbeddingRef, RejectsIdsOutsideTheVocabulary) {
  const int vocab = 10, hidden = 4;
  auto table = random_floats(static_cast<size_t>(vocab) * hidden, 5);
  std::vector<float> out(3 * hidden);
  std::vector<int32_t> ids = {1, 10, 2};
  try {
    embedding_ref(out.data(), ids.data(), table.data(), 3, hidden, vocab);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 10 at index 1"), std::string::npos) << e.what();
  }
  ids = {-1};
  EXPECT_THROW(embedding_ref(out.data(), ids.data(), table.data(), 1, hidden, vocab), Error);
  ids = {3};
  EXPECT_THROW(embedding_ref(out.data(), ids.data(), table.data(), 1, hidden, vocab, 5, 11), Error);
}

}  // namespace
}  // namespace conveyor
