// One pre-norm decoder layer: h = x + attn(norm(x)); x' = h + mlp(norm(h)). The residual stream x
// is the only state between layers (and between pipeline stages), updated in place.
#pragma once

#include "runtime/dist/communicator.h"
#include "stages/attention.h"
#include "stages/mlp.h"

namespace conveyor {

class DecoderLayer {
 public:
  DecoderLayer(const ModelTraits& traits, int layer, WeightBank& weights, Communicator* tp);
  int index() const { return index_; }
  // residual: [tokens, hidden], in and out.
  void forward(Ops& ops, const TensorView& residual, const KvLayerView& cache) const;
  static constexpr int kGemms = 4;  // q|k|v, o, gate|up, down
  // The layer's kGemms GEMMs at `rows` rows on scratch activations: no norm, attention or cache write.
  void warm_up(Ops& ops, int64_t rows) const {
    attention_.warm_up(ops, rows);
    mlp_.warm_up(ops, rows);
  }

 private:
  int index_;
  float eps_;
  Tensor attn_norm_;
  Tensor mlp_norm_;
  Attention attention_;
  Mlp mlp_;
};

}  // namespace conveyor
