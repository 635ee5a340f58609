// Storage of the paged KV cache for one pipeline stage: K and V pools for each of the stage's layers,
// in the layout the attention kernels read (kernels/cpu/attention.h): per layer
// [num_blocks, block_size, n_kv_heads, head_dim] for K and again for V, n_kv_heads being this TP
// rank's. Layers are addressed by their global index in the model. Block ids come from the leader.
// Host fp32 by default; a GPU backend hands in device storage of its dtype (the pools are opaque here).
// An FP8 cache (dtype kU8: e4m3 codes) also holds each layer's per-tensor K and V scales (1.0 until set).
// kv_bytes_per_token is the one formula of KV size: the caches, both memory plans and the partitioner use it.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/dtype.h"

namespace conveyor {

// Bytes of one token's K and V over `layers` layers of n_kv_heads x head_dim elements of elem_bytes
// (2 for bf16/f16, 1 for FP8 e4m3, 4 for the CPU's fp32).
inline size_t kv_bytes_per_token(int layers, int n_kv_heads, int head_dim, size_t elem_bytes) {
  return 2 * static_cast<size_t>(layers) * static_cast<size_t>(n_kv_heads) * static_cast<size_t>(head_dim) * elem_bytes;
}

// What a KV cache stores its elements as, for the start-up line and `conveyor plan`: "fp8_e4m3" (kU8),
// "bf16", "f16", "f32".
std::string kv_dtype_label(DType storage);

class KvCache;
// The start-up line about a stage's KV cache and its scales, given how many of its layers had
// k_scale/v_scale in the checkpoint: where an FP8 cache's scales come from (the checkpoint, else 1.0
// like vLLM), or that a checkpoint's scales go unused by a 16-bit cache; "" for a plain cache.
// calculated: cache.calculate_kv_scales is on (the first step's K and V give the scales).
std::string describe_kv_cache(const KvCache& cache, int layers_with_scales, bool calculated = false);
// After the first step with cache.calculate_kv_scales: the layers' range of k and v scales, one line.
std::string describe_calculated_kv_scales(const KvCache& cache, int64_t step);

// cache.calculate_kv_scales: a layer's scales from the largest |K| and |V| of its first step, as vLLM's
// --calculate-kv-scales (K to 200 of e4m3's 448, V to 100); a zero (or non-finite) amax keeps 1.0.
constexpr float kKvScaleKRange = 200.f, kKvScaleVRange = 100.f;
KvScales kv_scales_from_amax(float k_amax, float v_amax);

class KvCache {
 public:
  // Layers [first_layer, first_layer + num_layers) of the model, all with the same shape, in host
  // memory, zero-filled: fp32 (kF32) or FP8 e4m3 codes (kU8).
  KvCache(int first_layer, int num_layers, const PagedKvShape& shape, DType dtype = DType::kF32);
  // The same over storage the caller allocated and zero-filled (e.g. device memory) holding
  // bytes_needed(num_layers, shape, dtype) bytes; `storage` keeps it alive.
  KvCache(int first_layer, int num_layers, const PagedKvShape& shape, DType dtype, std::shared_ptr<void> storage);

  int first_layer() const { return first_layer_; }
  int num_layers() const { return num_layers_; }
  const PagedKvShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  bool fp8() const { return dtype_ == DType::kU8; }
  size_t bytes() const { return elems_ * dtype_size(dtype_); }
  // Per-tensor scales of an FP8 layer (stored = e4m3(x / scale)); finite and > 0, else it throws.
  void set_scales(int layer, const KvScales& scales);
  const KvScales& scales(int layer) const { return scales_[index(layer)]; }

  // Pools of one layer in whatever memory the cache lives in.
  void* k_data(int layer) const { return base() + offset(layer, 0) * dtype_size(dtype_); }
  void* v_data(int layer) const { return base() + offset(layer, 1) * dtype_size(dtype_); }
  // Host fp32 caches only (throws otherwise).
  float* k(int layer) { return host_f32(k_data(layer)); }
  float* v(int layer) { return host_f32(v_data(layer)); }
  const float* k(int layer) const { return host_f32(k_data(layer)); }
  const float* v(int layer) const { return host_f32(v_data(layer)); }

  static size_t bytes_needed(int num_layers, const PagedKvShape& shape, DType dtype) {
    return static_cast<size_t>(shape.num_blocks) *
           bytes_per_block(num_layers, shape.block_size, shape.n_kv_heads, shape.head_dim, dtype_size(dtype));
  }
  // Bytes one block costs over num_layers layers, K and V together.
  static size_t bytes_per_block(int num_layers, int block_size, int n_kv_heads, int head_dim,
                                size_t elem_bytes);
  // How many blocks fit in budget_bytes (0 when not even one does).
  static int blocks_that_fit(size_t budget_bytes, int num_layers, int block_size, int n_kv_heads, int head_dim,
                             size_t elem_bytes);

 private:
  size_t index(int layer) const;  // layer - first_layer, checked
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
  std::vector<KvScales> scales_;  // per layer
};

}  // namespace conveyor
