// Tensor-parallel linear layers and their collectives (see parallel_linear.h). Every collective runs
// on backend memory, ordered on the backend's stream (NCCL on a GPU, MPI on the host), so logits
// never leave the device here: the sampler reads them where they are.
#include "stages/parallel_linear.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

bool distributed(const Communicator* tp) { return tp != nullptr && tp->size() > 1; }

void all_reduce_sum(Communicator* tp, Ops& ops, const TensorView& t) {
  if (!distributed(tp)) return;
  tp->all_reduce(t.data, t.data, static_cast<size_t>(t.numel()), t.dtype, ReduceOp::kSum, ops.stream());
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Tensor weight, Tensor bias)
    : weight_(std::move(weight)), bias_(std::move(bias)) {}

Tensor ColumnParallelLinear::forward(Ops& ops, const TensorView& x) const {
  Tensor y = ops.empty(x.rows, weight_.rows());
  ops.linear(y.view(), x, weight_.view(), bias_.view());
  return y;
}

Tensor ColumnParallelLinear::forward_normed(Ops& ops, const TensorView& x, const NormView& norm) const {
  Tensor y = ops.empty(x.rows, weight_.rows());
  ops.rms_norm_linear(y.view(), x, norm, weight_.view(), bias_.view());
  return y;
}

void ColumnParallelLinear::warm_up(Ops& ops, int64_t rows) const {
  Tensor x = ops.empty(rows, weight_.cols());
  Tensor y = ops.empty(rows, weight_.rows());
  ops.linear(y.view(), x.view(), weight_.view(), bias_.view());
}

RowParallelLinear::RowParallelLinear(Tensor weight, Communicator* tp) : weight_(std::move(weight)), tp_(tp) {}

Tensor RowParallelLinear::forward(Ops& ops, const TensorView& x) const {
  Tensor y = ops.empty(x.rows, weight_.rows());
  ops.linear(y.view(), x, weight_.view(), TensorView{});
  all_reduce_sum(tp_, ops, y.view());
  return y;
}

void RowParallelLinear::forward_add(Ops& ops, const TensorView& x, const TensorView& residual) const {
  if (!distributed(tp_)) {
    ops.linear_add(residual, x, weight_.view());
    return;
  }
  Tensor y = forward(ops, x);
  ops.add(residual, residual, y.view());
}

void RowParallelLinear::forward_add_silu(Ops& ops, const TensorView& gate_up, const TensorView& residual) const {
  if (!distributed(tp_)) {
    ops.silu_mul_linear(residual, gate_up, weight_.view(), true);
    return;
  }
  Tensor y = ops.empty(gate_up.rows, weight_.rows());
  ops.silu_mul_linear(y.view(), gate_up, weight_.view(), false);
  all_reduce_sum(tp_, ops, y.view());
  ops.add(residual, residual, y.view());
}

void RowParallelLinear::warm_up(Ops& ops, int64_t rows) const {
  Tensor x = ops.empty(rows, weight_.cols());
  Tensor y = ops.empty(rows, weight_.rows());
  if (!distributed(tp_)) {
    ops.linear_add(y.view(), x.view(), weight_.view());
  } else {
    ops.linear(y.view(), x.view(), weight_.view(), TensorView{});
  }
}

VocabParallelEmbedding::VocabParallelEmbedding(Tensor table, int vocab_size, int vocab_start, Communicator* tp)
    : table_(std::move(table)), vocab_size_(vocab_size), vocab_start_(vocab_start), tp_(tp) {}

Tensor VocabParallelEmbedding::forward(Ops& ops) const {
  Tensor out = ops.empty(ops.batch().num_tokens(), table_.cols());
  ops.embedding(out.view(), table_.view(), vocab_size_, vocab_start_);
  all_reduce_sum(tp_, ops, out.view());
  return out;
}

ParallelLmHead::ParallelLmHead(Tensor weight, int vocab_size, Communicator* tp)
    : weight_(std::move(weight)), vocab_size_(vocab_size), tp_(tp) {}

Tensor ParallelLmHead::forward(Ops& ops, const TensorView& x) const {
  const int64_t n = x.rows;
  const int64_t local = weight_.rows();
  if (!distributed(tp_)) {
    CONVEYOR_CHECK(local == vocab_size_, "LM head holds ", local, " vocab rows of ", vocab_size_, " without TP");
    Tensor logits = ops.empty(n, vocab_size_, DType::kF32);
    ops.linear(logits.view(), x, weight_.view(), TensorView{});
    return logits;
  }
  const int tp = tp_->size();
  const int64_t shard = (vocab_size_ + tp - 1) / tp;  // every rank sends shard columns per row
  CONVEYOR_CHECK(local <= shard, "LM head shard has ", local, " rows, more than ceil(vocab/tp) = ", shard);
  // The last shard may be short: its padding columns are sent but dropped below, never read.
  Tensor send = ops.empty(n, shard, DType::kF32);
  if (local == shard) {
    ops.linear(send.view(), x, weight_.view(), TensorView{});
  } else {
    Tensor part = ops.empty(n, local, DType::kF32);
    ops.linear(part.view(), x, weight_.view(), TensorView{});
    if (local > 0) ops.copy_cols(send.view(), 0, part.view(), 0, local);
  }
  Tensor all = ops.empty(tp * n, shard, DType::kF32);  // [tp][n, shard]
  tp_->all_gather(send.view().data, all.view().data, static_cast<size_t>(n * shard), DType::kF32, ops.stream());
  Tensor logits = ops.empty(n, vocab_size_, DType::kF32);
  for (int rank = 0; rank < tp; ++rank) {
    const int64_t begin = rank * shard;
    const int64_t count = std::min<int64_t>(shard, vocab_size_ - begin);
    if (count > 0) ops.copy_cols(logits.view(), begin, all.view().row_slice(rank * n, n), 0, count);
  }
  return logits;
}

void ParallelLmHead::warm_up(Ops& ops, int64_t rows) const {
  Tensor x = ops.empty(rows, weight_.cols());
  Tensor logits = ops.empty(rows, weight_.rows(), DType::kF32);
  ops.linear(logits.view(), x.view(), weight_.view(), TensorView{});
}

}  // namespace conveyor
