// Attention (see attention.h). Q, K and V stay three matmuls so each lands contiguous in the
// [tokens, heads, head_dim] layout rope and the paged kernels read, without a split copy.
#include "stages/attention.h"

#include <string>

namespace conveyor {
namespace {

ColumnParallelLinear projection(WeightBank& w, const std::string& prefix, const char* weight, const char* bias,
                                bool with_bias) {
  Tensor b = with_bias ? w.take(prefix + bias) : Tensor();
  return ColumnParallelLinear(w.take(prefix + weight), std::move(b));
}

}  // namespace

Attention::Attention(const ModelTraits& traits, int layer, WeightBank& w, Communicator* tp)
    : config_(traits.attention), rope_(traits.rope) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  q_ = projection(w, p, "q_proj", "q_bias", traits.qkv_bias);
  k_ = projection(w, p, "k_proj", "k_bias", traits.qkv_bias);
  v_ = projection(w, p, "v_proj", "v_bias", traits.qkv_bias);
  o_ = RowParallelLinear(w.take(p + "o_proj"), tp);
}

Tensor Attention::forward(Ops& ops, const TensorView& x, const KvLayerView& cache) const {
  Tensor q = q_.forward(ops, x);
  Tensor k = k_.forward(ops, x);
  Tensor v = v_.forward(ops, x);
  ops.rope(q.view(), k.view(), config_.n_heads, config_.n_kv_heads, rope_);
  Tensor attn = ops.empty(q.rows(), q.cols());
  ops.attention(attn.view(), q.view(), k.view(), v.view(), cache, config_);
  return o_.forward(ops, attn.view());
}

}  // namespace conveyor
