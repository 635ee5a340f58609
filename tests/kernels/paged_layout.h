// The host side of a paged attention test batch, shared by the CPU and GPU kernel tests: block tables
// over a shuffled pool, positions and query starts for sequences given as (cached history, new tokens).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"

namespace conveyor::testing {

// A batch's paging: block tables over a shuffled pool (5 spare blocks) with one spare
// -1 entry per sequence, positions and query starts.
struct PagedLayout {
  PagedKvShape shape;
  std::vector<int32_t> query_start{0}, positions, tables;
  int max_blocks = 0, max_query_len = 0, max_context_len = 0;
  size_t tokens() const { return positions.size(); }
  AttentionBatch batch() const {
    AttentionBatch b;
    b.num_seqs = static_cast<int>(query_start.size()) - 1;
    b.query_start = query_start.data();
    b.positions = positions.data();
    b.block_tables = tables.data();
    b.max_blocks_per_seq = max_blocks;
    return b;
  }
};

// seqs: (cached history, new tokens) per sequence.
inline PagedLayout lay_out(const std::vector<std::pair<int, int>>& seqs, int block_size, int n_kv_heads, int head_dim,
                           std::mt19937_64& rng) {
  PagedLayout h;
  int total_blocks = 0;
  for (auto [hist, fresh] : seqs) {
    const int blocks = (hist + fresh + block_size - 1) / block_size;
    total_blocks += blocks;
    h.max_blocks = std::max(h.max_blocks, blocks + 1);  // one spare entry stays -1
    h.max_query_len = std::max(h.max_query_len, fresh);
    h.max_context_len = std::max(h.max_context_len, hist + fresh);
  }
  h.shape = PagedKvShape{total_blocks + 5, block_size, n_kv_heads, head_dim};
  std::vector<int32_t> ids(h.shape.num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (auto [hist, fresh] : seqs) {
    const int blocks = (hist + fresh + block_size - 1) / block_size;
    for (int i = 0; i < h.max_blocks; ++i) h.tables.push_back(i < blocks ? ids[next++] : -1);
    for (int p = hist; p < hist + fresh; ++p) h.positions.push_back(p);
    h.query_start.push_back(h.query_start.back() + fresh);
  }
  return h;
}

}  // namespace conveyor::testing
