// The start-up memory table: every term of every rank printed in GiB, the rank without room marked,
// the advice given only when some rank does not fit; and the collective check on one rank.
#include "stages/memory_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

MemoryRow row(int rank, double weights_gib, long long blocks) {
  MemoryRow r;
  r.rank = rank;
  r.stage = rank;
  r.device = rank;
  r.host = "node" + std::to_string(rank);
  r.total = 140 * kGiB;
  r.allowed = 0.9 * r.total;
  r.in_use = 0.5 * kGiB;
  r.weights = weights_gib * kGiB;
  r.activations = 2 * kGiB;
  r.sampling = 0.25 * kGiB;
  r.graphs = 1.5 * kGiB;
  r.margin = 1 * kGiB;
  r.kv_blocks = blocks;
  r.kv_block_bytes = 4 * 1024 * 1024;
  return r;
}

TEST(MemoryTable, ListsEveryTermAndMarksTheRankThatDoesNotFit) {
  const std::vector<MemoryRow> rows = {row(0, 65.0, 12000), row(1, 131.5, -3)};
  const std::string t = format_memory_table(rows, 0.9);
  EXPECT_NE(t.find("node0"), std::string::npos) << t;
  EXPECT_NE(t.find("node1"), std::string::npos) << t;
  // Rank 1: 126 usable - 0.5 in use - (131.5 + 2 + 0.25 + 1.5 + 1) reserved = -10.75 GiB left.
  EXPECT_NE(t.find("131.50"), std::string::npos) << t;
  EXPECT_NE(t.find("126.00"), std::string::npos) << t;
  EXPECT_NE(t.find("-10.75"), std::string::npos) << t;
  EXPECT_NE(t.find("-3  <- does not fit"), std::string::npos) << t;
  EXPECT_EQ(t.find("12000  <- does not fit"), std::string::npos) << t;
  EXPECT_NE(t.find("Use more GPUs"), std::string::npos) << t;
  EXPECT_NE(t.find("4.00 MiB"), std::string::npos) << t;
}

TEST(MemoryTable, NoAdviceWhenEveryRankFits) {
  const std::string t = format_memory_table({row(0, 10.0, 5), row(1, 10.0, 7)}, 0.9);
  EXPECT_EQ(t.find("does not fit"), std::string::npos) << t;
  EXPECT_EQ(t.find("Use more GPUs"), std::string::npos) << t;
}

TEST(MemoryTable, RowLeftIsUsableMinusInUseMinusReserved) {
  const MemoryRow r = row(0, 65.0, 1);
  EXPECT_DOUBLE_EQ(r.left(), 126 * kGiB - 0.5 * kGiB - (65.0 + 2 + 0.25 + 1.5 + 1) * kGiB);
}

// The head names what the weights and the KV cache are stored as (FP8 or 16-bit).
TEST(MemoryTable, HeadShowsFp8WeightsAndKv) {
  MemoryRow fp8 = row(0, 10.0, 5);
  fp8.kv_elem_bytes = 1;
  fp8.fp8_weights = true;
  fp8.kv_block_bytes = 2 * 1024 * 1024;
  const std::string t = format_memory_table({fp8}, 0.9);
  EXPECT_NE(t.find("weights: fp8_e4m3 layer linears; KV cache: fp8_e4m3 (1 byte per element), 2.00 MiB per block"),
            std::string::npos) << t;
  const std::string b = format_memory_table({row(0, 10.0, 5)}, 0.9);
  EXPECT_NE(b.find("weights: 16-bit; KV cache: 16-bit (2 bytes per element), 4.00 MiB per block"), std::string::npos)
      << b;
}

}  // namespace
}  // namespace conveyor
