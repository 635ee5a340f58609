// Mlp (see mlp.h).
#include "stages/mlp.h"

#include <string>

#include "runtime/core/error.h"

namespace conveyor {

Mlp::Mlp(const ModelTraits& traits, int layer, WeightBank& w, Communicator* tp) {
  const std::string p = "layers." + std::to_string(layer) + ".";
  gate_up_ = ColumnParallelLinear(w.take_linear({p + "gate_proj", p + "up_proj"}), Tensor());
  CONVEYOR_CHECK(gate_up_.out_features() == 2 * traits.intermediate_local, "layer ", layer, ": gate/up hold ",
                 gate_up_.out_features(), " rows, expected 2 x ", traits.intermediate_local);
  down_ = RowParallelLinear(w.take_linear({p + "down_proj"}), tp);
}

void Mlp::forward(Ops& ops, const NormView& norm, const TensorView& residual) const {
  Tensor gate_up = gate_up_.forward_normed(ops, residual, norm);
  down_.forward_add_silu(ops, gate_up.view(), residual);
}

void Mlp::warm_up(Ops& ops, int64_t rows) const {
  gate_up_.warm_up(ops, rows);
  down_.warm_up(ops, rows);
}

}  // namespace conveyor
