// Host storage of the paged KV cache for one pipeline stage: K and V pools for each of the stage's
// layers, in the layout the attention kernels read (kernels/cpu/attention.h): per layer
// [num_blocks, block_size, n_kv_heads, head_dim] for K and again for V, n_kv_heads being this TP
// rank's. Layers are addressed by their global index in the model. Block ids come from the leader.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu/attention.h"

namespace conveyor {

class KvCache {
 public:
  // Layers [first_layer, first_layer + num_layers) of the model, all with the same shape.
  KvCache(int first_layer, int num_layers, const PagedKvShape& shape);

  int first_layer() const { return first_layer_; }
  int num_layers() const { return num_layers_; }
  const PagedKvShape& shape() const { return shape_; }
  size_t bytes() const { return elems_ * sizeof(float); }

  float* k(int layer) { return storage_.get() + offset(layer, 0); }
  float* v(int layer) { return storage_.get() + offset(layer, 1); }
  const float* k(int layer) const { return storage_.get() + offset(layer, 0); }
  const float* v(int layer) const { return storage_.get() + offset(layer, 1); }

  // Bytes one block costs over num_layers layers, K and V together.
  static size_t bytes_per_block(int num_layers, int block_size, int n_kv_heads, int head_dim,
                                size_t elem_bytes = sizeof(float));
  // How many blocks fit in budget_bytes (0 when not even one does).
  static int blocks_that_fit(size_t budget_bytes, int num_layers, int block_size, int n_kv_heads, int head_dim,
                             size_t elem_bytes = sizeof(float));

 private:
  size_t offset(int layer, int which) const;

  int first_layer_;
  int num_layers_;
  PagedKvShape shape_;
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  // [num_layers, 2 (K, V), num_blocks, block_size, n_kv_heads, head_dim]; calloc'd, so a large pool
  // costs nothing until its pages are first written.
  std::unique_ptr<float[], FreeDeleter> storage_;
  size_t elems_ = 0;
};

}  // namespace conveyor
