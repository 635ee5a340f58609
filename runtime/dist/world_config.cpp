// Rank arithmetic (see world_config.h).
#include "runtime/dist/world_config.h"

#include "runtime/core/error.h"

namespace conveyor {

WorldConfig::WorldConfig(Layout layout, int rank) : layout_(layout), rank_(rank) {
  CONVEYOR_CHECK(layout.data >= 1 && layout.pipeline >= 1 && layout.tensor >= 1,
                 "layout sizes must be >= 1: data ", layout.data, ", pipeline ", layout.pipeline, ", tensor ",
                 layout.tensor);
  CONVEYOR_CHECK(rank >= 0 && rank < layout.world_size(), "rank ", rank, " is outside the world of ",
                 layout.world_size(), " ranks");
}

RankCoord WorldConfig::coord_of(int rank) const {
  CONVEYOR_CHECK(rank >= 0 && rank < world_size(), "rank ", rank, " outside world of ", world_size());
  RankCoord c;
  c.tensor = rank % layout_.tensor;
  c.stage = (rank / layout_.tensor) % layout_.pipeline;
  c.data = rank / (layout_.tensor * layout_.pipeline);
  return c;
}

int WorldConfig::rank_of(const RankCoord& c) const {
  CONVEYOR_CHECK(c.data >= 0 && c.data < layout_.data && c.stage >= 0 && c.stage < layout_.pipeline &&
                     c.tensor >= 0 && c.tensor < layout_.tensor,
                 "coordinate (data ", c.data, ", stage ", c.stage, ", tensor ", c.tensor, ") outside the layout");
  return (c.data * layout_.pipeline + c.stage) * layout_.tensor + c.tensor;
}

std::vector<int> WorldConfig::tensor_group() const {
  RankCoord c = coord();
  std::vector<int> out;
  for (int t = 0; t < layout_.tensor; ++t) out.push_back(rank_of({c.data, c.stage, t}));
  return out;
}

std::vector<int> WorldConfig::pipeline_group() const {
  RankCoord c = coord();
  std::vector<int> out;
  for (int s = 0; s < layout_.pipeline; ++s) out.push_back(rank_of({c.data, s, c.tensor}));
  return out;
}

std::vector<int> WorldConfig::data_group() const {
  RankCoord c = coord();
  std::vector<int> out;
  for (int d = 0; d < layout_.data; ++d) out.push_back(rank_of({d, c.stage, c.tensor}));
  return out;
}

int WorldConfig::prev_stage_rank() const {
  RankCoord c = coord();
  return c.stage == 0 ? -1 : rank_of({c.data, c.stage - 1, c.tensor});
}

int WorldConfig::next_stage_rank() const {
  RankCoord c = coord();
  return c.stage + 1 == layout_.pipeline ? -1 : rank_of({c.data, c.stage + 1, c.tensor});
}

int WorldConfig::tensor_group_color() const { return coord().data * layout_.pipeline + coord().stage; }
int WorldConfig::pipeline_group_color() const { return coord().data * layout_.tensor + coord().tensor; }
int WorldConfig::data_group_color() const { return coord().stage * layout_.tensor + coord().tensor; }

std::string WorldConfig::describe() const {
  RankCoord c = coord();
  return "rank " + std::to_string(rank_) + ": data " + std::to_string(c.data) + ", stage " +
         std::to_string(c.stage) + ", tensor " + std::to_string(c.tensor);
}

}  // namespace conveyor
