// embedding_cuda against the CPU twin (kernels/cpu/embedding.h): whole table and a vocab-parallel
// shard (ids outside it give zero rows), random tables and ids, every element checked bit for bit.
#include "kernels/cuda/embedding.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/embedding.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::TestBuffer;
using testing::download;
using testing::random_floats;
using testing::round_all;
using testing::upload;
using testing::upload_ids;

constexpr int kVocab = 1000;

void check(DType dt, int tokens, int hidden, int vocab_start, int vocab_end) {
  const int shard = vocab_end - vocab_start;
  const auto table = round_all(random_floats(static_cast<size_t>(shard) * hidden, hidden + shard, -1.f, 1.f), dt);
  std::mt19937 rng(static_cast<unsigned>(tokens * 7 + hidden));
  std::uniform_int_distribution<int32_t> pick(0, kVocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (auto& id : ids) id = pick(rng);
  ids[0] = vocab_start;  // both ends of the shard, and one id just past it
  if (tokens > 1) ids[1] = vocab_end - 1;
  if (tokens > 2) ids[2] = vocab_end < kVocab ? vocab_end : vocab_start;
  std::vector<float> want(static_cast<size_t>(tokens) * hidden);
  embedding_ref(want.data(), ids.data(), table.data(), tokens, hidden, kVocab, vocab_start, vocab_end);

  auto dtable = upload(table, dt);
  auto dids = upload_ids(ids);
  TestBuffer dout(want.size() * dtype_size(dt));
  embedding_cuda(dout.get(), dtable.get(), dids.as<int32_t>(), tokens, hidden, vocab_start, shard, dt, nullptr);
  EXPECT_EQ(compare_all(download(dout.get(), want.size(), dt), want, 0.f, 0.f), "")
      << dtype_name(dt) << " tokens=" << tokens << " hidden=" << hidden << " shard=[" << vocab_start << ", "
      << vocab_end << ")";
}

TEST(EmbeddingGpu, MatchesCpuTwin) {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int tokens : {1, 3, 257}) {
      for (int hidden : {1, 7, 576, 4095, 8192}) {
        check(dt, tokens, hidden, 0, kVocab);      // whole table
        check(dt, tokens, hidden, 250, 500);       // one shard of four
      }
    }
  }
}

TEST(EmbeddingGpu, RejectsBadArguments) {
  TestBuffer buf(64);
  EXPECT_THROW(embedding_cuda(buf.get(), buf.get(), buf.as<int32_t>(), 1, 8, 0, 10, DType::kI32, nullptr), Error);
  EXPECT_THROW(embedding_cuda(buf.get(), buf.get(), buf.as<int32_t>(), 1, 0, 0, 10, DType::kBF16, nullptr), Error);
  EXPECT_THROW(embedding_cuda(buf.get(), buf.get(), buf.as<int32_t>(), 1, 8, -1, 10, DType::kBF16, nullptr), Error);
}

}  // namespace
}  // namespace conveyor
