// Rank arithmetic: tensor innermost, then pipeline, then data; groups and neighbours for several layouts.
#include "runtime/dist/world_config.h"

#include <gtest/gtest.h>

#include <set>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

TEST(WorldConfig, TensorIsInnermost) {
  Layout l{2, 3, 4};  // 24 ranks
  WorldConfig w(l, 0);
  EXPECT_EQ(w.rank_of({0, 0, 1}), 1);
  EXPECT_EQ(w.rank_of({0, 1, 0}), 4);
  EXPECT_EQ(w.rank_of({1, 0, 0}), 12);
  EXPECT_EQ(w.rank_of({1, 2, 3}), 23);
}

class LayoutTest : public ::testing::TestWithParam<Layout> {};

TEST_P(LayoutTest, CoordinatesAreABijection) {
  Layout l = GetParam();
  std::set<std::tuple<int, int, int>> seen;
  for (int r = 0; r < l.world_size(); ++r) {
    WorldConfig w(l, r);
    RankCoord c = w.coord();
    EXPECT_EQ(w.rank_of(c), r);
    EXPECT_TRUE(seen.insert({c.data, c.stage, c.tensor}).second);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), l.world_size());
}

TEST_P(LayoutTest, GroupsAndNeighbours) {
  Layout l = GetParam();
  for (int r = 0; r < l.world_size(); ++r) {
    WorldConfig w(l, r);
    RankCoord c = w.coord();
    auto tg = w.tensor_group();
    ASSERT_EQ(static_cast<int>(tg.size()), l.tensor);
    EXPECT_EQ(tg[c.tensor], r);
    for (int t = 0; t < l.tensor; ++t) {
      RankCoord o = w.coord_of(tg[t]);
      EXPECT_EQ(o.data, c.data);
      EXPECT_EQ(o.stage, c.stage);
      EXPECT_EQ(o.tensor, t);
      EXPECT_EQ(WorldConfig(l, tg[t]).tensor_group_color(), w.tensor_group_color());
    }
    auto pg = w.pipeline_group();
    ASSERT_EQ(static_cast<int>(pg.size()), l.pipeline);
    for (int s = 0; s < l.pipeline; ++s) {
      RankCoord o = w.coord_of(pg[s]);
      EXPECT_EQ(o.stage, s);
      EXPECT_EQ(o.tensor, c.tensor);
      EXPECT_EQ(o.data, c.data);
      EXPECT_EQ(WorldConfig(l, pg[s]).pipeline_group_color(), w.pipeline_group_color());
    }
    auto dg = w.data_group();
    ASSERT_EQ(static_cast<int>(dg.size()), l.data);
    for (int d = 0; d < l.data; ++d) EXPECT_EQ(WorldConfig(l, dg[d]).data_group_color(), w.data_group_color());
    EXPECT_EQ(w.prev_stage_rank(), c.stage == 0 ? -1 : pg[c.stage - 1]);
    EXPECT_EQ(w.next_stage_rank(), c.stage == l.pipeline - 1 ? -1 : pg[c.stage + 1]);
    EXPECT_EQ(w.is_leader(), c.stage == 0 && c.tensor == 0);
    EXPECT_EQ(w.leader_rank(), w.rank_of({c.data, 0, 0}));
    EXPECT_EQ(w.is_first_stage(), c.stage == 0);
    EXPECT_EQ(w.is_last_stage(), c.stage == l.pipeline - 1);
  }
  // Ranks in different groups have different colors.
  std::set<int> colors;
  for (int r = 0; r < l.world_size(); ++r) colors.insert(WorldConfig(l, r).tensor_group_color());
  EXPECT_EQ(static_cast<int>(colors.size()), l.data * l.pipeline);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutTest,
                         ::testing::Values(Layout{1, 1, 1}, Layout{1, 2, 1}, Layout{1, 1, 2}, Layout{1, 2, 2},
                                           Layout{2, 2, 1}, Layout{1, 4, 2}, Layout{2, 4, 8}, Layout{3, 5, 2},
                                           Layout{4, 1, 8}));

TEST(WorldConfig, RejectsBadInput) {
  EXPECT_THROW(WorldConfig(Layout{1, 2, 2}, 4), Error);
  EXPECT_THROW(WorldConfig(Layout{1, 2, 2}, -1), Error);
  EXPECT_THROW(WorldConfig(Layout{1, 0, 2}, 0), Error);
  WorldConfig w(Layout{1, 2, 2}, 0);
  EXPECT_THROW(w.rank_of({0, 2, 0}), Error);
  EXPECT_THROW(w.coord_of(4), Error);
}

}  // namespace
}  // namespace conveyor
