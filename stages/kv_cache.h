// Storage of the paged KV cache for one pipeline stage: K and V pools for each of the stage's layers,
// in the layout the attention kernels read (kernels/cpu/attention.h): per layer
// [num_blocks, block_size, n_kv_heads, head_dim] for K and again for V, n_kv_heads being this TP
// rank's. Layers are addressed by their global index in the model. Block ids come from the leader.
// Host fp32 by default; a GPU backend hands in device storage of its dtype (the pools are opaque here).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/dtype.h"

namespace conveyor {

class KvCache {
 public:
  // Layers [first_layer, first_layer + num_layers) of the model, all with the same shape: host fp32,
  // zero-filled.
  KvCache(int first_layer, int num_layers, const PagedKvShape& shape);
  // The same over storage the caller allocated and zero-filled (e.g. device memory) holding
  // bytes_needed(num_layers, shape, dtype) bytes; `storage` keeps it alive.
  KvCache(int first_layer, int num_layers, const PagedKvShape& shape, DType dtype, std::shared_ptr<void> storage);

  int first_layer() const { return first_layer_; }
  int num_layers() const { return num_layers_; }
  const PagedKvShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return elems_ * dtype_size(dtype_); }

  // Pools of one layer in whatever memory the cache lives in.
  void* k_data(int layer) const { return base() + offset(layer, 0) * dtype_size(dtype_); }
  void* v_data(int layer) const { return base() + offset(layer, 1) * dtype_size(dtype_); }
  // Host fp32 caches only (throws otherwise).
  float* k(int layer) { return host_f32(k_data(layer)); }
  float* v(int layer) { return host_f32(v_data(layer)); }
  const float* k(int layer) const { return host_f32(k_data(layer)); }
  const float* v(int layer) const { return host_f32(v_data(layer)); }

  static size_t bytes_needed(int num_layers, const PagedKvShape& shape, DType dtype) {
    return 2 * static_cast<size_t>(num_layers) * shape.layer_elems() * dtype_size(dtype);
  }
  // Bytes one block costs over num_layers layers, K and V together.
  static size_t bytes_per_block(int num_layers, int block_size, int n_kv_heads, int head_dim,
                                size_t elem_bytes = sizeof(float));
  // How many blocks fit in budget_bytes (0 when not even one does).
  static int blocks_that_fit(size_t budget_bytes, int num_layers, int block_size, int n_kv_heads, int head_dim,
                             size_t elem_bytes = sizeof(float));

 private:
  size_t offset(int layer, int which) const;
  char* base() const { return static_cast<char*>(storage_.get()); }
  float* host_f32(void* p) const;

  int first_layer_;
  int num_layers_;
  PagedKvShape shape_;
  DType dtype_ = DType::kF32;
  bool host_ = true;
  // [num_layers, 2 (K, V), num_blocks, block_size, n_kv_heads, head_dim]; the host pool is calloc'd,
  // so a large pool costs nothing until its pages are first written.
  std::shared_ptr<void> storage_;
  size_t elems_ = 0;
};

}  // namespace conveyor
