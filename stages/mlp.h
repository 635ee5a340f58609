// The SwiGLU MLP of a Llama-family layer: gate and up as one column-parallel projection (this rank's
// gate rows, then its up rows, so each output row is gate | up as silu_mul reads it), then the
// row-parallel down projection, whose all-reduce makes the output whole.
#pragma once

#include "runtime/dist/communicator.h"
#include "stages/architecture.h"
#include "stages/parallel_linear.h"
#include "stages/weight_bank.h"

namespace conveyor {

class Mlp {
 public:
  Mlp(const ModelTraits& traits, int layer, WeightBank& weights, Communicator* tp);
  // residual [tokens, hidden] += the MLP's output for rms_norm(residual) (the norm rides gate_up, the
  // activation the down projection: Ops::rms_norm_linear, Ops::silu_mul_linear).
  void forward(Ops& ops, const NormView& norm, const TensorView& residual) const;
  void warm_up(Ops& ops, int64_t rows) const;  // the projections' GEMMs (StageModel::warm_up_gemms)

 private:
  ColumnParallelLinear gate_up_;
  RowParallelLinear down_;
};

}  // namespace conveyor
