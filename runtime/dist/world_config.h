// All rank arithmetic of conveyor. world = data x pipeline x tensor with tensor innermost (TP peers are
// neighbouring ranks, so they share a node's NVLink), then pipeline stages, then data replicas:
//   rank = (data * pipeline_size + stage) * tensor_size + tensor_rank.
// Nothing else in the code computes a peer's rank.
#pragma once

#include <string>
#include <vector>

namespace conveyor {

struct Layout {
  int data = 1;
  int pipeline = 1;
  int tensor = 1;
  int world_size() const { return data * pipeline * tensor; }
};

struct RankCoord {
  int data = 0;
  int stage = 0;
  int tensor = 0;
};

class WorldConfig {
 public:
  WorldConfig(Layout layout, int rank);  // throws when a size is < 1 or rank is outside the world

  const Layout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int world_size() const { return layout_.world_size(); }

  RankCoord coord() const { return coord_of(rank_); }
  RankCoord coord_of(int rank) const;
  int rank_of(const RankCoord& c) const;

  int stage() const { return coord().stage; }
  int tensor_rank() const { return coord().tensor; }
  int data_rank() const { return coord().data; }
  bool is_first_stage() const { return stage() == 0; }
  bool is_last_stage() const { return stage() == layout_.pipeline - 1; }
  // The scheduler of a data replica runs on its stage 0, tensor rank 0.
  bool is_leader() const { return stage() == 0 && tensor_rank() == 0; }
  int leader_rank() const { return rank_of({data_rank(), 0, 0}); }

  // World ranks of this rank's groups, each ordered by the coordinate that varies in it.
  std::vector<int> tensor_group() const;    // same (data, stage)
  std::vector<int> pipeline_group() const;  // same (data, tensor), ordered by stage
  std::vector<int> data_group() const;      // same (stage, tensor), ordered by data replica

  // Neighbours in the pipeline (same data replica and tensor rank); -1 at the ends.
  int prev_stage_rank() const;
  int next_stage_rank() const;

  // Colors for MPI_Comm_split: ranks with equal colors form one group.
  int tensor_group_color() const;
  int pipeline_group_color() const;
  int data_group_color() const;

  std::string describe() const;  // "rank 5: data 0, stage 2, tensor 1"

 private:
  Layout layout_;
  int rank_;
};

}  // namespace conveyor
