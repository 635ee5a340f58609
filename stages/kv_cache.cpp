// KV cache storage (see kv_cache.h). One allocation for all layers; zero-filled so a read of a slot
// that was never written is deterministic.
#include "stages/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {
namespace {

void check_geometry(int first_layer, int num_layers, const PagedKvShape& shape) {
  CONVEYOR_CHECK(first_layer >= 0 && num_layers > 0, "KV cache: bad layer range first=", first_layer,
                 " count=", num_layers);
  CONVEYOR_CHECK(shape.num_blocks > 0 && shape.block_size > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0,
                 "KV cache: bad shape num_blocks=", shape.num_blocks, " block_size=", shape.block_size,
                 " n_kv_heads=", shape.n_kv_heads, " head_dim=", shape.head_dim);
}

}  // namespace

std::string kv_dtype_label(DType storage) {
  return storage == DType::kU8 ? "fp8_e4m3" : dtype_name(storage);
}

std::string describe_kv_cache(const KvCache& cache, int layers_with_scales, bool calculated) {
  const std::string layers = std::to_string(layers_with_scales) + " of " + std::to_string(cache.num_layers()) +
                             " layers";
  if (!cache.fp8()) {
    if (calculated) return "KV cache: " + kv_dtype_label(cache.dtype()) + "; --calculate-kv-scales has no effect "
                           "(scales are for --kv-cache-dtype fp8)";
    if (layers_with_scales == 0) return "";
    return "KV cache: " + kv_dtype_label(cache.dtype()) + "; the checkpoint's k_scale/v_scale (" + layers +
           ") are unused (--kv-cache-dtype fp8 stores e4m3 with them)";
  }
  if (calculated)
    return std::string("KV cache: fp8_e4m3, per-tensor k/v scales calculated from the first step's K and V (amax / "
                       "200, amax / 100; --calculate-kv-scales)") +
           (layers_with_scales > 0 ? ", not the checkpoint's k_scale/v_scale (" + layers + ")" : "");
  if (layers_with_scales == 0)
    return "KV cache: fp8_e4m3, per-tensor k/v scales 1.0 (the checkpoint has no k_scale/v_scale; as vLLM does)";
  return "KV cache: fp8_e4m3, per-tensor k/v scales from the checkpoint's k_scale/v_scale (" + layers + ")";
}

std::string describe_calculated_kv_scales(const KvCache& cache, int64_t step) {
  float k_lo = INFINITY, k_hi = 0, v_lo = INFINITY, v_hi = 0;
  for (int l = cache.first_layer(); l < cache.first_layer() + cache.num_layers(); ++l) {
    const KvScales& s = cache.scales(l);
    k_lo = std::min(k_lo, s.k), k_hi = std::max(k_hi, s.k), v_lo = std::min(v_lo, s.v), v_hi = std::max(v_hi, s.v);
  }
  char line[200];
  std::snprintf(line, sizeof line, "KV scales calculated at step %lld for layers %d-%d: k %.4g .. %.4g, v %.4g .. %.4g",
                static_cast<long long>(step), cache.first_layer(), cache.first_layer() + cache.num_layers() - 1, k_lo,
                k_hi, v_lo, v_hi);
  return line;
}

KvScales kv_scales_from_amax(float k_amax, float v_amax) {
  auto scale = [](float amax, float range) { return std::isfinite(amax) && amax > 0 ? amax / range : 1.f; };
  return KvScales{scale(k_amax, kKvScaleKRange), scale(v_amax, kKvScaleVRange)};
}

KvCache::KvCache(int first_layer, int num_layers, const PagedKvShape& shape, DType dtype)
    : first_layer_(first_layer), num_layers_(num_layers), shape_(shape), dtype_(dtype) {
  check_geometry(first_layer, num_layers, shape);
  CONVEYOR_CHECK(dtype == DType::kF32 || dtype == DType::kU8, "KV cache: host caches hold f32 or FP8 (u8 codes), not ",
                 dtype_name(dtype));
  const size_t elems = 2 * static_cast<size_t>(num_layers) * shape.layer_elems();
  void* p = std::calloc(elems, dtype_size(dtype));
  if (!p) {
    CONVEYOR_THROW("KV cache: cannot allocate ", format_bytes(double(elems) * dtype_size(dtype)), " for ",
                   shape.num_blocks, " blocks x ", num_layers, " layers; lower the KV cache memory or block count");
  }
  storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  elems_ = elems;
  scales_.assign(static_cast<size_t>(num_layers), KvScales{});
}

KvCache::KvCache(int first_layer, int num_layers, const PagedKvShape& shape, DType dtype,
                 std::shared_ptr<void> storage)
    : first_layer_(first_layer), num_layers_(num_layers), shape_(shape), dtype_(dtype), host_(false),
      storage_(std::move(storage)) {
  check_geometry(first_layer, num_layers, shape);
  CONVEYOR_CHECK(storage_ != nullptr, "KV cache: no storage given for ", num_layers, " layers");
  elems_ = 2 * static_cast<size_t>(num_layers) * shape.layer_elems();
  scales_.assign(static_cast<size_t>(num_layers), KvScales{});
}

void KvCache::set_scales(int layer, const KvScales& s) {
  CONVEYOR_CHECK(std::isfinite(s.k) && s.k > 0.f && std::isfinite(s.v) && s.v > 0.f, "KV cache: layer ", layer,
                 " needs finite, positive FP8 scales, got k_scale ", s.k, " and v_scale ", s.v);
  scales_[index(layer)] = s;
}

float* KvCache::host_f32(void* p) const {
  CONVEYOR_CHECK(host_ && dtype_ == DType::kF32, "KV cache: host fp32 access to a ", dtype_name(dtype_),
                 " cache in backend memory");
  return static_cast<float*>(p);
}

size_t KvCache::index(int layer) const {
  CONVEYOR_CHECK(layer >= first_layer_ && layer < first_layer_ + num_layers_, "KV cache: layer ", layer,
                 " is not held by this stage (it holds layers [", first_layer_, ", ", first_layer_ + num_layers_,
                 "))");
  return static_cast<size_t>(layer - first_layer_);
}

size_t KvCache::offset(int layer, int which) const { return (2 * index(layer) + which) * shape_.layer_elems(); }

size_t KvCache::bytes_per_block(int num_layers, int block_size, int n_kv_heads, int head_dim, size_t elem_bytes) {
  return static_cast<size_t>(block_size) * kv_bytes_per_token(num_layers, n_kv_heads, head_dim, elem_bytes);
}

int KvCache::blocks_that_fit(size_t budget_bytes, int num_layers, int block_size, int n_kv_heads, int head_dim,
                             size_t elem_bytes) {
  const size_t per_block = bytes_per_block(num_layers, block_size, n_kv_heads, head_dim, elem_bytes);
  CONVEYOR_CHECK(per_block > 0, "KV cache: a block of this shape has no size");
  const size_t n = budget_bytes / per_block;
  return n > static_cast<size_t>(std::numeric_limits<int>::max()) ? std::numeric_limits<int>::max()
                                                                   : static_cast<int>(n);
}

}  // namespace conveyor
