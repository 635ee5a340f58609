// Attention (see attention.h). Q, K and V are one matmul over the stacked weights; Ops::qkv_attention
// splits its rows into the [tokens, heads, head_dim] layouts rope and the paged kernels read (on a GPU
// fused with rope and the KV-cache write), and the O projection accumulates into the residual.
#include "stages/attention.h"

#include <string>

namespace conveyor {

Attention::Attention(const ModelTraits& traits, int layer, WeightBank& w, Communicator* tp)
    : config_(traits.attention), rope_(traits.rope) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  Tensor weight = w.take_linear({p + "q_proj", p + "k_proj", p + "v_proj"});
  Tensor bias = traits.qkv_bias ? w.take_concat_rows({p + "q_bias", p + "k_bias", p + "v_bias"}) : Tensor();
  qkv_ = ColumnParallelLinear(std::move(weight), std::move(bias));
  o_ = RowParallelLinear(w.take_linear({p + "o_proj"}), tp);
}

void Attention::forward(Ops& ops, const NormView& norm, const KvLayerView& cache, const TensorView& residual) const {
  Tensor qkv = qkv_.forward_normed(ops, residual, norm);
  Tensor attn = ops.empty(residual.rows, static_cast<int64_t>(config_.n_heads) * config_.head_dim);
  KvLayerView view = cache;
  if (cache.calibrate) {
    // K before the rotary embedding, which keeps each rotated pair's norm (at most sqrt(2) x amax, inside
    // e4m3's 448 = 2.24 x 200).
    const int64_t q_cols = static_cast<int64_t>(config_.n_heads) * config_.head_dim;
    const int64_t kv_cols = static_cast<int64_t>(config_.n_kv_heads) * config_.head_dim;
    view.scales = kv_scales_from_amax(ops.abs_max_cols(qkv.view(), q_cols, kv_cols),
                                      ops.abs_max_cols(qkv.view(), q_cols + kv_cols, kv_cols));
    *cache.calibrate = view.scales;
  }
  ops.qkv_attention(attn.view(), qkv.view(), view, config_, rope_);
  o_.forward_add(ops, attn.view(), residual);
}

void Attention::warm_up(Ops& ops, int64_t rows) const {
  qkv_.warm_up(ops, rows);
  o_.warm_up(ops, rows);
}

}  // namespace conveyor
