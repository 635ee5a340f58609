// Dummy weights (see weights_dummy.h): OpenMP over the share's elements, each mapped back to its
// flat index in the full tensor before hashing.
#include "runtime/weights_dummy.h"

namespace conveyor {

uint64_t dummy_tensor_key(uint64_t seed, const std::string& internal_name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : internal_name) h = (h ^ c) * 0x100000001b3ull;
  return dummy_mix(seed ^ dummy_mix(h));
}

WeightSet make_dummy_weights(const ModelSpec& spec, const WeightShare& share, uint64_t seed) {
  WeightSet set;
  for (const WeightId& id : share_weights(spec, share)) {
    HostTensor t = make_share_tensor(spec, id, share);
    // A tied LM head is the embedding: hash it under the embedding's name so both agree.
    bool tied_head = id.kind == WeightKind::kLmHead && spec.tie_word_embeddings;
    uint64_t key = dummy_tensor_key(seed, tied_head ? internal_name({WeightKind::kEmbedding, -1}) : t.name);
    bool norm = id.kind == WeightKind::kAttnNorm || id.kind == WeightKind::kMlpNorm || id.kind == WeightKind::kFinalNorm;
    float offset = norm ? 1.0f : 0.0f;
    int64_t full_cols = t.full_shape.size() == 2 ? t.full_shape[1] : 1;
    int64_t width = t.shape.size() == 2 ? t.shape[1] : 1;
    int64_t row0 = t.split_dim == 0 ? t.split_begin : 0, col0 = t.split_dim == 1 ? t.split_begin : 0;
    int64_t rows = t.numel() / width;
    float* out = t.data.data();
#pragma omp parallel for schedule(static) if (rows * width >= (1 << 16))
    for (int64_t r = 0; r < rows; ++r) {
      uint64_t base = static_cast<uint64_t>((row0 + r) * full_cols + col0);
      float* dst = out + r * width;
      for (int64_t c = 0; c < width; ++c) dst[c] = offset + kDummyStddev * dummy_normal(key, base + static_cast<uint64_t>(c));
    }
    set.tensors.emplace(t.name, std::move(t));
  }
  return set;
}

}  // namespace conveyor
