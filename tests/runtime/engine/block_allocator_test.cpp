// Tests BlockAllocator and BlockTable: all-or-nothing allocation, the "no free block" result that
// leaves everything untouched, misuse rejected, RAII return of blocks, and a random workload that
// checks after every step that no block is owned twice and the counts add up.
#include "runtime/engine/block_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

TEST(BlockAllocator, AllOrNothing) {
  BlockAllocator a(5);
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(3, got));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.free_count(), 2);
  EXPECT_FALSE(a.allocate(3, got));
  EXPECT_EQ(got.size(), 3u);  // nothing appended on failure
  EXPECT_EQ(a.free_count(), 2);
  ASSERT_TRUE(a.allocate(2, got));
  EXPECT_EQ(a.free_count(), 0);
  a.free(1);
  EXPECT_EQ(a.free_count(), 1);
  std::vector<int32_t> again;
  ASSERT_TRUE(a.allocate(1, again));
  EXPECT_EQ(again[0], 1);
}

TEST(BlockAllocator, RejectsMisuse) {
  EXPECT_THROW(BlockAllocator(0), Error);
  BlockAllocator a(2);
  EXPECT_THROW(a.free(0), Error);  // never allocated
  std::vector<int32_t> got;
  ASSERT_TRUE(a.allocate(1, got));
  a.free(got[0]);
  try {
    a.free(got[0]);
    FAIL() << "expected a double-free error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(a.free(2), Error);
  EXPECT_THROW(a.free(-1), Error);
}

TEST(BlockTable, AppendsAcrossBlockBoundaries) {
  BlockAllocator a(4);
  BlockTable t(a, 16);
  EXPECT_EQ(t.blocks_needed(1), 1);
  ASSERT_EQ(t.append(16), AppendResult::kOk);
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_EQ(t.blocks_needed(1), 1);
  ASSERT_EQ(t.append(1), AppendResult::kOk);
  EXPECT_EQ(t.blocks().size(), 2u);
  EXPECT_EQ(t.blocks_needed(15), 0);
  ASSERT_EQ(t.append(15), AppendResult::kOk);
  EXPECT_EQ(t.num_tokens(), 32);
  EXPECT_EQ(t.blocks().size(), 2u);
  ASSERT_EQ(t.append(0), AppendResult::kOk);
  EXPECT_EQ(t.blocks().size(), 2u);
}

TEST(BlockTable, NoFreeBlockLeavesTableAndPoolUnchanged) {
  BlockAllocator a(3);
  BlockTable t(a, 4), u(a, 4);
  ASSERT_EQ(t.append(6), AppendResult::kOk);  // 2 blocks
  EXPECT_EQ(u.append(5), AppendResult::kNoFreeBlock);
  EXPECT_EQ(u.num_tokens(), 0);
  EXPECT_TRUE(u.blocks().empty());
  EXPECT_EQ(a.free_count(), 1);
  ASSERT_EQ(t.append(2), AppendResult::kOk);  // fills the second block, needs none
  EXPECT_EQ(t.append(1), AppendResult::kOk);  // takes the last block
  EXPECT_EQ(t.append(4), AppendResult::kNoFreeBlock);
  EXPECT_EQ(t.num_tokens(), 9);
  t.free_all();
  EXPECT_EQ(a.free_count(), 3);
  EXPECT_EQ(u.append(12), AppendResult::kOk);
}

TEST(BlockTable, ReturnsBlocksOnDestructionAndMove) {
  BlockAllocator a(6);
  {
    BlockTable t(a, 2);
    ASSERT_EQ(t.append(5), AppendResult::kOk);
    EXPECT_EQ(a.free_count(), 3);
    BlockTable moved(std::move(t));
    EXPECT_EQ(moved.num_tokens(), 5);
    EXPECT_EQ(a.free_count(), 3);
    BlockTable other(a, 2);
    ASSERT_EQ(other.append(2), AppendResult::kOk);
    EXPECT_EQ(a.free_count(), 2);
    other = std::move(moved);  // other's old block goes back
    EXPECT_EQ(a.free_count(), 3);
    EXPECT_EQ(other.num_tokens(), 5);
  }
  EXPECT_EQ(a.free_count(), 6);
}

TEST(BlockTable, CopyToPadsAndChecksWidth) {
  BlockAllocator a(8);
  BlockTable t(a, 4);
  ASSERT_EQ(t.append(9), AppendResult::kOk);
  std::vector<int32_t> row(5, 99);
  t.copy_to(row.data(), 5);
  EXPECT_EQ(row, (std::vector<int32_t>{0, 1, 2, -1, -1}));
  EXPECT_THROW(t.copy_to(row.data(), 2), Error);
}

TEST(BlockTable, RandomWorkloadKeepsOwnershipExclusive) {
  const int num_blocks = 64, block_size = 16;
  BlockAllocator a(num_blocks);
  std::vector<std::unique_ptr<BlockTable>> seqs;
  for (int i = 0; i < 10; ++i) seqs.push_back(std::make_unique<BlockTable>(a, block_size));
  std::mt19937 rng(7);
  int failures = 0;
  for (int step = 0; step < 5000; ++step) {
    BlockTable& s = *seqs[rng() % seqs.size()];
    if (rng() % 10 == 0) {
      s.free_all();
    } else {
      const int n = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % 100) : 1;
      const int before_tokens = s.num_tokens();
      const int before_free = a.free_count();
      const int need = s.blocks_needed(n);
      if (s.append(n) == AppendResult::kOk) {
        ASSERT_EQ(s.num_tokens(), before_tokens + n);
        ASSERT_EQ(a.free_count(), before_free - need);
      } else {
        ++failures;
        ASSERT_GT(need, before_free);
        ASSERT_EQ(s.num_tokens(), before_tokens);
        ASSERT_EQ(a.free_count(), before_free);
      }
    }
    std::set<int32_t> owned;
    size_t held = 0;
    for (const auto& t : seqs) {
      ASSERT_EQ(t->blocks().size(), size_t((t->num_tokens() + block_size - 1) / block_size));
      owned.insert(t->blocks().begin(), t->blocks().end());
      held += t->blocks().size();
    }
    ASSERT_EQ(owned.size(), held) << "a block is owned twice at step " << step;
    ASSERT_EQ(static_cast<int>(held), a.used_count());
  }
  EXPECT_GT(failures, 0) << "the workload never ran out of blocks; it does not test preemption";
  seqs.clear();
  EXPECT_EQ(a.free_count(), num_blocks);
}

}  // namespace
}  // namespace conveyor
