// The self-attention block of a Llama-family layer: column-parallel Q, K, V projections fused into one
// GEMM (with bias on qwen2), rotary embedding, paged attention over this layer's KV pool, row-parallel O projection
// (whose all-reduce makes the output whole on every TP rank).
#pragma once

#include "runtime/dist/communicator.h"
#include "stages/architecture.h"
#include "stages/parallel_linear.h"
#include "stages/weight_bank.h"

namespace conveyor {

class Attention {
 public:
  Attention(const ModelTraits& traits, int layer, WeightBank& weights, Communicator* tp);
  // residual [tokens, hidden] += the block's output for rms_norm(residual) (the norm rides the QKV
  // projection: Ops::rms_norm_linear).
  void forward(Ops& ops, const NormView& norm, const KvLayerView& cache, const TensorView& residual) const;
  void warm_up(Ops& ops, int64_t rows) const;  // the projections' GEMMs (StageModel::warm_up_gemms)

 private:
  ColumnParallelLinear qkv_;  // this rank's q rows | k rows | v rows: one GEMM
  RowParallelLinear o_;
  AttentionConfig config_;
  RopeParams rope_;
};

}  // namespace conveyor
