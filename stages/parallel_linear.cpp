// Tensor-parallel linear layers and their collectives (see parallel_linear.h). The all-reduces run
// in place on backend memory; the LM head gathers on the host because the runner returns host
// logits anyway (a GPU backend gathers on the device and downloads once).
#include "stages/parallel_linear.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/error.h"

namespace conveyor {
namespace {

bool distributed(const Communicator* tp) { return tp != nullptr && tp->size() > 1; }

void all_reduce_sum(Communicator* tp, const TensorView& t) {
  if (!distributed(tp)) return;
  tp->all_reduce(t.data, t.data, static_cast<size_t>(t.numel()), t.dtype, ReduceOp::kSum, nullptr);
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Tensor weight, Tensor bias)
    : weight_(std::move(weight)), bias_(std::move(bias)) {}

Tensor ColumnParallelLinear::forward(Ops& ops, const TensorView& x) const {
  Tensor y = ops.empty(x.rows, weight_.rows());
  ops.linear(y.view(), x, weight_.view(), bias_.view());
  return y;
}

RowParallelLinear::RowParallelLinear(Tensor weight, Communicator* tp) : weight_(std::move(weight)), tp_(tp) {}

Tensor RowParallelLinear::forward(Ops& ops, const TensorView& x) const {
  Tensor y = ops.empty(x.rows, weight_.rows());
  ops.linear(y.view(), x, weight_.view(), TensorView{});
  all_reduce_sum(tp_, y.view());
  return y;
}

VocabParallelEmbedding::VocabParallelEmbedding(Tensor table, int vocab_size, int vocab_start, Communicator* tp)
    : table_(std::move(table)), vocab_size_(vocab_size), vocab_start_(vocab_start), tp_(tp) {}

Tensor VocabParallelEmbedding::forward(Ops& ops) const {
  Tensor out = ops.empty(ops.batch().num_tokens(), table_.cols());
  ops.embedding(out.view(), table_.view(), vocab_size_, vocab_start_);
  all_reduce_sum(tp_, out.view());
  return out;
}

ParallelLmHead::ParallelLmHead(Tensor weight, int vocab_size, Communicator* tp)
    : weight_(std::move(weight)), vocab_size_(vocab_size), tp_(tp) {}

void ParallelLmHead::forward(Ops& ops, const TensorView& x, std::vector<float>* logits) const {
  const int64_t n = x.rows;
  const int64_t local = weight_.rows();
  Tensor part = ops.empty(n, local);
  ops.linear(part.view(), x, weight_.view(), TensorView{});
  logits->assign(static_cast<size_t>(n * vocab_size_), 0.f);
  if (!distributed(tp_)) {
    CONVEYOR_CHECK(local == vocab_size_, "LM head holds ", local, " vocab rows of ", vocab_size_, " without TP");
    ops.download(part.view(), logits->data());
    return;
  }
  const int tp = tp_->size();
  const int64_t shard = (vocab_size_ + tp - 1) / tp;  // every rank sends shard columns per row
  CONVEYOR_CHECK(local <= shard, "LM head shard has ", local, " rows, more than ceil(vocab/tp) = ", shard);
  std::vector<float> mine(static_cast<size_t>(n * local));
  ops.download(part.view(), mine.data());
  std::vector<float> send(static_cast<size_t>(n * shard), -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < n; ++r) std::copy_n(mine.data() + r * local, local, send.data() + r * shard);
  std::vector<float> all(send.size() * tp);
  tp_->all_gather(send.data(), all.data(), send.size());
  for (int rank = 0; rank < tp; ++rank) {
    const int64_t begin = rank * shard;
    const int64_t count = std::min<int64_t>(shard, vocab_size_ - begin);
    for (int64_t r = 0; count > 0 && r < n; ++r)
      std::copy_n(all.data() + (rank * n + r) * shard, count, logits->data() + r * vocab_size_ + begin);
  }
}

}  // namespace conveyor
