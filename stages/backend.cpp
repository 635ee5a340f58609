// The backend-neutral helpers of backend.h.
#include "stages/backend.h"

namespace conveyor {

bool same_rope(const RopeParams& a, const RopeParams& b) {
  return a.head_dim == b.head_dim && a.theta == b.theta && a.kind == b.kind && a.factor == b.factor &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.max_position_embeddings == b.max_position_embeddings;
}

std::unique_ptr<RopeTable> make_rope_table(const RopeParams& p) {
  RopeFreqScaling s;
  switch (p.kind) {
    case RopeKind::kDefault: s.type = RopeFreqType::kNone; break;
    case RopeKind::kLinear: s.type = RopeFreqType::kLinear; break;
    case RopeKind::kLlama3: s.type = RopeFreqType::kLlama3; break;
    case RopeKind::kDynamic: s.type = RopeFreqType::kDynamic; break;
  }
  s.factor = static_cast<float>(p.factor);
  s.low_freq_factor = static_cast<float>(p.low_freq_factor);
  s.high_freq_factor = static_cast<float>(p.high_freq_factor);
  s.original_max_position_embeddings = p.original_max_position_embeddings;
  return std::make_unique<RopeTable>(p.head_dim, p.theta, s, p.max_position_embeddings);
}

}  // namespace conveyor
