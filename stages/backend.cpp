// The backend-neutral helpers of backend.h.
#include "stages/backend.h"

#include <vector>

#include "kernels/cpu/add.h"
#include "runtime/core/error.h"

namespace conveyor {

bool same_rope(const RopeParams& a, const RopeParams& b) {
  return a.head_dim == b.head_dim && a.theta == b.theta && a.kind == b.kind && a.factor == b.factor &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.max_position_embeddings == b.max_position_embeddings;
}

std::unique_ptr<RopeTable> make_rope_table(const RopeParams& p) {
  RopeFreqScaling s;
  switch (p.kind) {
    case RopeKind::kDefault: s.type = RopeFreqType::kNone; break;
    case RopeKind::kLinear: s.type = RopeFreqType::kLinear; break;
    case RopeKind::kLlama3: s.type = RopeFreqType::kLlama3; break;
    case RopeKind::kDynamic: s.type = RopeFreqType::kDynamic; break;
  }
  s.factor = static_cast<float>(p.factor);
  s.low_freq_factor = static_cast<float>(p.low_freq_factor);
  s.high_freq_factor = static_cast<float>(p.high_freq_factor);
  s.original_max_position_embeddings = p.original_max_position_embeddings;
  return std::make_unique<RopeTable>(p.head_dim, p.theta, s, p.max_position_embeddings);
}

void validate_batch(const BatchInfo& b, const char* backend) {
  CONVEYOR_CHECK(b.query_start.size() >= 1 && b.query_start.back() == b.num_tokens(), backend,
                 " set_batch: query_start must end at the token count ", b.num_tokens());
  CONVEYOR_CHECK(b.token_ids.empty() || static_cast<int>(b.token_ids.size()) == b.num_tokens(), backend,
                 " set_batch: ", b.token_ids.size(), " token ids for ", b.num_tokens(), " positions");
  CONVEYOR_CHECK(static_cast<int>(b.rope_seq_len.size()) == b.num_seqs() &&
                     b.block_tables.size() == static_cast<size_t>(b.num_seqs()) * b.max_blocks,
                 backend, " set_batch: per-sequence arrays do not match ", b.num_seqs(), " sequences");
}

Tensor Ops::adopt_fp8(Fp8HostWeight&& w) {
  CONVEYOR_THROW("this backend has no FP8 linears (weight '", w.name, "'); run without --quantization fp8");
}

float Ops::abs_max_cols(const TensorView& x, int64_t col, int64_t cols) {
  std::vector<float> host(static_cast<size_t>(x.numel()));
  download(x, host.data());
  return abs_max_cols_ref(host.data(), x.rows, x.cols, col, cols);
}

void Ops::linear_add(const TensorView& out, const TensorView& x, const TensorView& w) {
  Tensor y = empty(out.rows, out.cols, out.dtype);
  linear(y.view(), x, w, TensorView{});
  add(out, out, y.view());
}

void Ops::rms_norm_linear(const TensorView& out, const TensorView& x, const NormView& norm, const TensorView& w,
                          const TensorView& bias) {
  Tensor h = empty(x.rows, x.cols, x.dtype);
  rms_norm(h.view(), x, norm.weight, norm.eps);
  linear(out, h.view(), w, bias);
}

void Ops::silu_mul_linear(const TensorView& out, const TensorView& gate_up, const TensorView& w, bool accumulate) {
  Tensor act = empty(gate_up.rows, gate_up.cols / 2, gate_up.dtype);
  silu_mul(act.view(), gate_up);
  if (accumulate) linear_add(out, act.view(), w);
  else linear(out, act.view(), w, TensorView{});
}

void Ops::qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache,
                        const AttentionConfig& cfg, const RopeParams& rope_params) {
  const int64_t q_cols = static_cast<int64_t>(cfg.n_heads) * cfg.head_dim;
  const int64_t kv_cols = static_cast<int64_t>(cfg.n_kv_heads) * cfg.head_dim;
  CONVEYOR_CHECK(qkv.cols == q_cols + 2 * kv_cols, "qkv_attention: qkv has ", qkv.cols, " columns, expected ",
                 q_cols, " + 2 x ", kv_cols);
  Tensor q = empty(qkv.rows, q_cols, qkv.dtype);
  Tensor k = empty(qkv.rows, kv_cols, qkv.dtype);
  Tensor v = empty(qkv.rows, kv_cols, qkv.dtype);
  copy_cols(q.view(), 0, qkv, 0, q_cols);
  copy_cols(k.view(), 0, qkv, q_cols, kv_cols);
  copy_cols(v.view(), 0, qkv, q_cols + kv_cols, kv_cols);
  rope(q.view(), k.view(), cfg.n_heads, cfg.n_kv_heads, rope_params);
  attention(out, q.view(), k.view(), v.view(), cache, cfg);
}

}  // namespace conveyor
