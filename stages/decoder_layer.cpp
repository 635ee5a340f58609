// DecoderLayer (see decoder_layer.h). Both residual adds ride the row-parallel projections (O and
// down accumulate into the stream), so the stream leaving a layer (and a stage) is the plain hidden state.
#include "stages/decoder_layer.h"

#include <string>

namespace conveyor {
namespace {

std::string name(int layer, const char* w) { return "layers." + std::to_string(layer) + "." + w; }

}  // namespace

DecoderLayer::DecoderLayer(const ModelTraits& traits, int layer, WeightBank& w, Communicator* tp)
    : index_(layer),
      eps_(traits.rms_norm_eps),
      attn_norm_(w.take(name(layer, "attn_norm"))),
      mlp_norm_(w.take(name(layer, "mlp_norm"))),
      attention_(traits, layer, w, tp),
      mlp_(traits, layer, w, tp) {}

void DecoderLayer::forward(Ops& ops, const TensorView& residual, const KvLayerView& cache) const {
  attention_.forward(ops, NormView{attn_norm_.view(), eps_}, cache, residual);
  mlp_.forward(ops, NormView{mlp_norm_.view(), eps_}, residual);
}

}  // namespace conveyor
