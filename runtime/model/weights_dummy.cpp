// Dummy weights (see weights_dummy.h): a lazy set whose fills hash each element of the share at its
// flat index in the full tensor. The fill is OpenMP-parallel over rows (over element blocks for 1-D
// tensors), so a big tensor's pages are written by all cores, not one.
#include "runtime/model/weights_dummy.h"

#include <algorithm>
#include <utility>

namespace conveyor {

uint64_t dummy_tensor_key(uint64_t seed, const std::string& internal_name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : internal_name) h = (h ^ c) * 0x100000001b3ull;
  return dummy_mix(seed ^ dummy_mix(h));
}

void fill_dummy(const HostTensor& t, uint64_t key, float offset, float* out) {
  const bool matrix = t.full_shape.size() == 2;
  const int64_t full_cols = matrix ? t.full_shape[1] : 1;
  const int64_t row0 = t.split_dim == 0 ? t.split_begin : 0, col0 = t.split_dim == 1 ? t.split_begin : 0;
  // A 1-D tensor is cut into rows of kSpan elements so it, too, spreads over the threads.
  constexpr int64_t kSpan = 4096;
  const int64_t n = t.numel();
  const int64_t width = matrix ? t.shape[1] : std::min<int64_t>(n, kSpan);
  const int64_t rows = width > 0 ? (n + width - 1) / width : 0;
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t base = matrix ? static_cast<uint64_t>((row0 + r) * full_cols + col0)
                                 : static_cast<uint64_t>(row0 + r * width);
    const int64_t count = std::min(width, n - r * width);
    float* dst = out + r * width;
    for (int64_t c = 0; c < count; ++c)
      dst[c] = offset + kDummyStddev * dummy_normal(key, base + static_cast<uint64_t>(c));
  }
}

WeightSet make_dummy_weights(const ModelSpec& spec, const WeightShare& share, uint64_t seed) {
  WeightSet set;
  for (const WeightId& id : share_weights(spec, share)) {
    HostTensor t = make_share_header(spec, id, share);
    // A tied LM head is the embedding: hash it under the embedding's name so both agree.
    const bool tied_head = id.kind == WeightKind::kLmHead && spec.tie_word_embeddings;
    const uint64_t key = dummy_tensor_key(seed, tied_head ? internal_name({WeightKind::kEmbedding, -1}) : t.name);
    const bool norm =
        id.kind == WeightKind::kAttnNorm || id.kind == WeightKind::kMlpNorm || id.kind == WeightKind::kFinalNorm;
    const float offset = norm ? 1.0f : 0.0f;
    set.add(std::move(t), [key, offset](const HostTensor& h, float* out) { fill_dummy(h, key, offset, out); });
  }
  return set;
}

}  // namespace conveyor
