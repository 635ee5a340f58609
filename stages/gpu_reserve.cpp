// gpu_reserve (see gpu_reserve.h).
#include "stages/gpu_reserve.h"

#include <algorithm>

#include "stages/architecture.h"

namespace conveyor {

GpuReserve gpu_reserve(const ModelSpec& spec, int tp, bool lm_head, int64_t max_tokens, int64_t max_seqs, size_t elem,
                       bool graphs) {
  const ModelTraits traits = model_traits(spec, tp);
  const size_t q_cols = static_cast<size_t>(traits.attention.n_heads) * traits.attention.head_dim;
  const size_t kv_cols = static_cast<size_t>(traits.attention.n_kv_heads) * traits.attention.head_dim;
  const size_t hidden = static_cast<size_t>(traits.hidden);
  const size_t per_token = 4 * hidden + 2 * q_cols + 2 * kv_cols + 3 * static_cast<size_t>(traits.intermediate_local);
  const size_t vocab = static_cast<size_t>(spec.vocab);
  const size_t rows = static_cast<size_t>(std::max<int64_t>(max_seqs, 0));
  GpuReserve r;
  r.activations = 2 * static_cast<size_t>(std::max<int64_t>(max_tokens, 0)) * per_token * elem;
  if (graphs) {
    const size_t padded = std::min<size_t>(2 * rows, 256);  // buckets up to max_seqs sum to < 2x it
    r.graph_pool = 2 * padded * per_token * elem + 2 * padded * (hidden * elem + (lm_head ? vocab * 4 : 0));
    r.graphs = r.graph_pool + 2 * padded * hidden * elem;
  }
  r.logits = lm_head ? rows * vocab * sizeof(float) * (3 + static_cast<size_t>(tp)) : 0;
  return r;
}

double gpu_reserve_estimate(const ModelSpec& spec, int tp, bool lm_head, int64_t max_tokens, int64_t max_seqs,
                            size_t elem, bool graphs) {
  constexpr double kWorkspaces = 0.1 * (1ull << 30), kContext = 1.8 * (1ull << 30);
  const GpuReserve r = gpu_reserve(spec, tp, lm_head, max_tokens, max_seqs, elem, graphs);
  return static_cast<double>(r.activations + r.graphs + r.logits + kGpuFixedMargin) + kWorkspaces + kContext;
}

}  // namespace conveyor
