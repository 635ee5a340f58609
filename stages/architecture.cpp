// ModelSpec -> ModelTraits (see architecture.h). The sliding window is taken as given: ModelSpec
// keeps it only when the model would use it, and the attention kernels implement it.
#include "stages/architecture.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/model/weights_layout.h"

namespace conveyor {
namespace {

RopeParams rope_params(const ModelSpec& spec) {
  RopeParams p;
  p.head_dim = static_cast<int>(spec.head_dim);
  p.theta = spec.rope_theta;
  p.max_position_embeddings = static_cast<int>(spec.max_position_embeddings);
  const RopeScaling& s = spec.rope_scaling;
  switch (s.type) {
    case RopeScalingType::kNone: p.kind = RopeKind::kDefault; break;
    case RopeScalingType::kLinear: p.kind = RopeKind::kLinear; break;
    case RopeScalingType::kLlama3: p.kind = RopeKind::kLlama3; break;
    case RopeScalingType::kDynamic: p.kind = RopeKind::kDynamic; break;
  }
  p.factor = s.factor;
  p.low_freq_factor = s.low_freq_factor;
  p.high_freq_factor = s.high_freq_factor;
  p.original_max_position_embeddings = static_cast<int>(s.original_max_position_embeddings);
  return p;
}

}  // namespace

ModelTraits model_traits(const ModelSpec& spec, int tp_size) {
  check_tensor_parallel(spec, tp_size);
  ModelTraits t;
  t.hidden = static_cast<int>(spec.hidden);
  t.intermediate_local = static_cast<int>(spec.intermediate / tp_size);
  t.vocab = static_cast<int>(spec.vocab);
  t.rms_norm_eps = static_cast<float>(spec.rms_norm_eps);
  t.qkv_bias = spec.qkv_bias;
  t.tie_word_embeddings = spec.tie_word_embeddings;
  t.attention.n_heads = static_cast<int>(spec.heads / tp_size);
  // KV heads split across ranks, or replicated when there are fewer than ranks.
  t.attention.n_kv_heads = static_cast<int>(kv_heads_per_rank(spec, tp_size));
  t.attention.head_dim = static_cast<int>(spec.head_dim);
  t.attention.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.head_dim)));
  t.attention.sliding_window = spec.sliding_window ? static_cast<int>(*spec.sliding_window) : 0;
  t.rope = rope_params(spec);
  return t;
}

}  // namespace conveyor
