// validate_batch (stages/backend.h), the one check of a step's metadata that every backend's
// set_batch runs: a consistent batch passes, each kind of mismatch throws a message naming the
// backend and the array, and the CPU backend's set_batch refuses what validate_batch refuses.
#include "stages/backend.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/core/error.h"
#include "stages/cpu_ops.h"

namespace conveyor {
namespace {

// Two sequences of 3 and 2 new tokens, 2 blocks each.
BatchInfo good_batch() {
  BatchInfo b;
  b.token_ids = {5, 6, 7, 8, 9};
  b.positions = {0, 1, 2, 4, 5};
  b.query_start = {0, 3, 5};
  b.max_blocks = 2;
  b.block_tables = {0, 1, 2, -1};
  b.rope_seq_len = {3, 6};
  b.logit_rows = {2, 4};
  return b;
}

// The message validate_batch throws for b, or "" when it accepts it.
std::string rejection(const BatchInfo& b, const char* backend) {
  try {
    validate_batch(b, backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ValidateBatch, AcceptsConsistentBatches) {
  EXPECT_EQ(rejection(good_batch(), "cpu"), "");
  BatchInfo no_ids = good_batch();
  no_ids.token_ids.clear();  // a stage without the embedding
  EXPECT_EQ(rejection(no_ids, "cpu"), "");
  BatchInfo empty;
  empty.query_start = {0};
  EXPECT_EQ(rejection(empty, "cuda"), "");
}

TEST(ValidateBatch, NamesTheBackendAndTheMismatch) {
  BatchInfo b = good_batch();
  b.query_start = {0, 3, 4};
  std::string msg = rejection(b, "cuda");
  EXPECT_NE(msg.find("cuda set_batch: query_start must end at the token count 5"), std::string::npos) << msg;

  b = good_batch();
  b.query_start.clear();
  msg = rejection(b, "cpu");
  EXPECT_NE(msg.find("cpu set_batch: query_start must end"), std::string::npos) << msg;

  b = good_batch();
  b.token_ids.pop_back();
  msg = rejection(b, "cpu");
  EXPECT_NE(msg.find("cpu set_batch: 4 token ids for 5 positions"), std::string::npos) << msg;

  b = good_batch();
  b.rope_seq_len.push_back(1);
  msg = rejection(b, "cuda");
  EXPECT_NE(msg.find("cuda set_batch: per-sequence arrays do not match 2 sequences"), std::string::npos) << msg;

  b = good_batch();
  b.block_tables.pop_back();
  msg = rejection(b, "cpu");
  EXPECT_NE(msg.find("cpu set_batch: per-sequence arrays do not match 2 sequences"), std::string::npos) << msg;
}

TEST(ValidateBatch, CpuSetBatchRunsIt) {
  auto ops = make_cpu_ops();
  const BatchInfo good = good_batch();
  ops->set_batch(good);
  EXPECT_EQ(ops->batch().positions, good.positions);
  BatchInfo bad = good;
  bad.block_tables.push_back(3);
  EXPECT_THROW(ops->set_batch(bad), Error);
  EXPECT_EQ(ops->batch().block_tables, good.block_tables) << "a refused batch must not replace the last one";
}

}  // namespace
}  // namespace conveyor
