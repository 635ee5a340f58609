// choose_batch: the cap when the KV room is large, a smaller batch when it is small (with the buffers'
// share of memory growing with the candidate), the user's values always, a token budget never below the
// sequences, at least one sequence for a workload no candidate holds, and the start-up line.
#include "runtime/engine/batch_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace conveyor {
namespace {

BudgetRequest auto_request(int64_t seq_len, BatchRule rule = gpu_batch_rule()) {
  BudgetRequest r;
  r.seq_len = seq_len;
  r.block_size = 16;
  r.rule = rule;
  return r;
}

KvTokensFor constant(int64_t tokens) {
  return [tokens](const BatchBudget&) { return tokens; };
}

TEST(BatchBudget, LargeRoomTakesTheCap) {
  const BatchChoice c = choose_batch(auto_request(2048), constant(100'000'000));
  EXPECT_EQ(c.budget.max_num_seqs, 1024);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 8192);
  EXPECT_FALSE(c.seqs_from_user);
  EXPECT_FALSE(c.tokens_from_user);
  EXPECT_EQ(choose_batch(auto_request(2048, cpu_batch_rule()), constant(100'000'000)).budget.max_num_seqs, 256);
}

TEST(BatchBudget, SmallRoomTakesWhatItHolds) {
  // 210 sequences of 2048 tokens fit: 128 is the candidate, refined up to the 210 the room holds below 256.
  const BatchChoice c = choose_batch(auto_request(2048), constant(210 * 2048 + 100));
  EXPECT_EQ(c.budget.max_num_seqs, 210);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 8192);
  // Exactly a candidate's worth: that candidate.
  EXPECT_EQ(choose_batch(auto_request(1000), constant(64 * 1008)).budget.max_num_seqs, 64);
}

TEST(BatchBudget, SequencesTakeWholeBlocks) {
  // 17 tokens take two blocks of 16: 32 tokens of room per sequence.
  EXPECT_EQ(choose_batch(auto_request(17), constant(32 * 40)).budget.max_num_seqs, 40);
  EXPECT_EQ(choose_batch(auto_request(17), constant(32 * 40 - 1)).budget.max_num_seqs, 39);
}

TEST(BatchBudget, BuffersThatGrowWithTheBatchShrinkTheRoom) {
  // Each sequence of budget costs 1,000 tokens of KV room (its buffers), from 600,000.
  const KvTokensFor room = [](const BatchBudget& b) { return 600'000 - 1'000 * b.max_num_seqs; };
  const BatchChoice c = choose_batch(auto_request(1024), room);
  const int64_t s = c.budget.max_num_seqs;
  EXPECT_LE(s * 1024, room(c.budget)) << "the chosen batch must fit with its own buffers";
  EXPECT_GT((s + 1) * 1024, room(BatchBudget{s + 1, 8192})) << "one more sequence must not fit";
  EXPECT_EQ(s, 296);  // the largest s with 600,000 - 1,000 s >= 1,024 s
}

TEST(BatchBudget, UserValuesWin) {
  BudgetRequest r = auto_request(2048);
  r.user.max_num_seqs = 3;
  BatchChoice c = choose_batch(r, constant(100'000'000));
  EXPECT_EQ(c.budget.max_num_seqs, 3);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 8192);
  EXPECT_TRUE(c.seqs_from_user);
  EXPECT_FALSE(c.tokens_from_user);
  // A user batch larger than the room holds stays (the scheduler preempts).
  r.user.max_num_seqs = 900;
  r.user.max_num_batched_tokens = 512;
  c = choose_batch(r, constant(16));
  EXPECT_EQ(c.budget.max_num_seqs, 900);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 512);
  EXPECT_TRUE(c.tokens_from_user);
}

TEST(BatchBudget, UserTokenBudgetCapsAutoSequences) {
  BudgetRequest r = auto_request(64);
  r.user.max_num_batched_tokens = 100;
  const BatchChoice c = choose_batch(r, constant(100'000'000));
  EXPECT_EQ(c.budget.max_num_seqs, 100);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 100);
  EXPECT_EQ(choose_batch(r, constant(64 * 70)).budget.max_num_seqs, 70);
}

TEST(BatchBudget, TokenBudgetNeverBelowSequences) {
  BatchRule rule = gpu_batch_rule();
  rule.token_budget = 256;
  for (int64_t room : {int64_t{100}, int64_t{50'000}, int64_t{400'000}, int64_t{100'000'000}}) {
    const BatchChoice c = choose_batch(auto_request(128, rule), constant(room));
    EXPECT_GE(c.budget.max_num_batched_tokens, c.budget.max_num_seqs) << "room " << room;
  }
  BudgetRequest r = auto_request(128, rule);
  r.user.max_num_seqs = 2000;
  EXPECT_EQ(choose_batch(r, constant(1)).budget.max_num_batched_tokens, 2000);
}

TEST(BatchBudget, WorkloadTooLongStillRunsOneSequence) {
  const BatchChoice c = choose_batch(auto_request(100'000), constant(4096));
  EXPECT_EQ(c.budget.max_num_seqs, 1);
  EXPECT_EQ(c.budget.max_num_batched_tokens, 8192);
  EXPECT_EQ(choose_batch(auto_request(16), constant(0)).budget.max_num_seqs, 1);
}

TEST(BatchBudget, ExpectedSequenceLength) {
  EXPECT_EQ(expected_seq_len(0, 8192), 2048);
  EXPECT_EQ(expected_seq_len(0, 512), 512);
  EXPECT_EQ(expected_seq_len(1536, 8192), 1536);
  EXPECT_EQ(expected_seq_len(10'000, 4096), 4096);
  EXPECT_EQ(expected_seq_len(300, 0), 300);
}

TEST(BatchBudget, StartUpLine) {
  BatchChoice c;
  c.budget = {384, 8192};
  EXPECT_EQ(describe_batch(c, auto_request(2048), 786'432),
            "batch from memory: max_num_seqs 384, max_num_batched_tokens 8192 (KV holds 786,432 tokens = 384 "
            "sequences of 2,048; set --max-num-seqs / --max-num-batched-tokens to override)");
  c.budget = {3, 8192};
  c.seqs_from_user = true;
  // 100 tokens take 7 blocks of 16: 112 tokens each.
  EXPECT_EQ(describe_batch(c, auto_request(100), 1'000),
            "batch from memory: max_num_seqs 3 (your value), max_num_batched_tokens 8192 (KV holds 1,000 tokens = "
            "8 sequences of 100; set --max-num-batched-tokens to override)");
  c.tokens_from_user = true;
  EXPECT_EQ(describe_batch(c, auto_request(100), 1'000).rfind("batch as configured: max_num_seqs 3 (your value), "
                                                "max_num_batched_tokens 8192 (your value) (KV holds", 0), 0u);
}

}  // namespace
}  // namespace conveyor
