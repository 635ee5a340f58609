// Tensor-parallel building blocks (Megatron style). Each holds its rank's weight shard and the TP
// group's communicator (nullptr, or a group of size 1, when tp = 1). ALL tensor-parallel collectives
// of the model live in this file: row-parallel linears and the vocab-parallel embedding all-reduce,
// the LM head all-gathers logits. Layer code only chains these and never asks its rank.
#pragma once

#include <vector>

#include "runtime/dist/communicator.h"
#include "stages/backend.h"

namespace conveyor {

// y = x W_r^T (+ b_r): W_r is this rank's rows (output features); no communication. Output columns
// are this rank's slice of the full output.
class ColumnParallelLinear {
 public:
  ColumnParallelLinear() = default;
  ColumnParallelLinear(Tensor weight, Tensor bias);  // weight [out_local, in], bias [1, out_local] or empty
  int64_t out_features() const { return weight_.rows(); }  // this rank's
  int64_t in_features() const { return weight_.cols(); }
  Tensor forward(Ops& ops, const TensorView& x) const;  // [tokens, out_local]
  // forward(rms_norm(x)), the norm fused into the linear where the backend can (Ops::rms_norm_linear).
  Tensor forward_normed(Ops& ops, const TensorView& x, const NormView& norm) const;
  // forward's GEMM at `rows` rows on scratch activations (StageModel::warm_up_gemms).
  void warm_up(Ops& ops, int64_t rows) const;

 private:
  Tensor weight_;
  Tensor bias_;
};

// y = sum_r x_r W_r^T: x holds this rank's slice of the input features, W_r the matching columns;
// the partial products are all-reduced over the TP group, so every rank ends with the full y.
class RowParallelLinear {
 public:
  RowParallelLinear() = default;
  RowParallelLinear(Tensor weight, Communicator* tp);  // weight [out, in_local]
  Tensor forward(Ops& ops, const TensorView& x) const;  // [tokens, out]
  // residual [tokens, out] += y. Without TP the GEMM accumulates into the residual (Ops::linear_add);
  // with TP the partial products are all-reduced first, then added.
  void forward_add(Ops& ops, const TensorView& x, const TensorView& residual) const;
  // forward_add(silu_mul(gate_up)), the activation fused into the linear where the backend can
  // (Ops::silu_mul_linear); gate_up [tokens, 2 * in_local].
  void forward_add_silu(Ops& ops, const TensorView& gate_up, const TensorView& residual) const;
  // forward_add's GEMM at `rows` rows on scratch activations, without the all-reduce.
  void warm_up(Ops& ops, int64_t rows) const;

 private:
  Tensor weight_;
  Communicator* tp_ = nullptr;
};

// Rows [vocab_start, vocab_start + rows) of the embedding table; ids outside give zeros and the
// all-reduce fills them in from the rank that holds them.
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding() = default;
  VocabParallelEmbedding(Tensor table, int vocab_size, int vocab_start, Communicator* tp);
  Tensor forward(Ops& ops) const;  // [tokens, hidden] for ops.batch().token_ids

 private:
  Tensor table_;
  int vocab_size_ = 0;
  int vocab_start_ = 0;
  Communicator* tp_ = nullptr;
};

// The LM head over a vocab shard: each rank computes its ceil(vocab/tp) columns of logits (the last
// shard padded with -inf), the all-gather joins them and the padding is dropped.
class ParallelLmHead {
 public:
  ParallelLmHead() = default;
  ParallelLmHead(Tensor weight, int vocab_size, Communicator* tp);  // weight [shard_rows, hidden]
  // Logits [x.rows, vocab], fp32, in backend memory (the sampler reads them there).
  Tensor forward(Ops& ops, const TensorView& x) const;
  // forward's GEMM at `rows` rows on scratch activations, without the all-gather.
  void warm_up(Ops& ops, int64_t rows) const;

 private:
  Tensor weight_;
  int vocab_size_ = 0;
  Communicator* tp_ = nullptr;
};

}  // namespace conveyor
