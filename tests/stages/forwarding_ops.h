// An Ops that hands every call to another (the CPU backend by default): the base of test decorators that
// change or observe a few ops (storage_twin_ops.h rounds, tests record). qkv_attention goes to the inner
// backend too; a decorator that overrides rope or attention must route qkv_attention through
// Ops::qkv_attention, which calls them.
#pragma once

#include <memory>
#include <utility>

#include "stages/backend.h"
#include "stages/cpu_ops.h"

namespace conveyor::testing {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(std::unique_ptr<Ops> inner = make_cpu_ops()) : in_(std::move(inner)) {}

  DType dtype() const override { return in_->dtype(); }
  using Ops::empty;
  Tensor empty(int64_t rows, int64_t cols, DType dt) override { return in_->empty(rows, cols, dt); }
  Tensor adopt(HostTensor&& w) override { return in_->adopt(std::move(w)); }
  Tensor adopt_fp8(Fp8HostWeight&& w) override { return in_->adopt_fp8(std::move(w)); }
  Tensor upload(const float* host, int64_t rows, int64_t cols) override { return in_->upload(host, rows, cols); }
  void download(const TensorView& t, float* host) override { in_->download(t, host); }
  void copy_cols(const TensorView& dst, int64_t dst_col, const TensorView& src, int64_t src_col, int64_t cols) override {
    in_->copy_cols(dst, dst_col, src, src_col, cols);
  }
  std::unique_ptr<KvCache> make_kv_cache(int first, int n, const PagedKvShape& shape, bool fp8) override {
    return in_->make_kv_cache(first, n, shape, fp8);
  }
  void set_batch(const BatchInfo& b) override {
    in_->set_batch(b);
    batch_ = b;
  }
  void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) override {
    in_->embedding(out, table, vocab_size, vocab_start);
  }
  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& w, float eps) override {
    in_->rms_norm(out, x, w, eps);
  }
  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    in_->linear(out, x, w, bias);
  }
  void linear_add(const TensorView& out, const TensorView& x, const TensorView& w) override { in_->linear_add(out, x, w); }
  void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) override {
    in_->rope(q, k, n_heads, n_kv_heads, p);
  }
  void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvLayerView& cache, const AttentionConfig& cfg) override {
    in_->attention(out, q, k, v, cache, cfg);
  }
  void qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache, const AttentionConfig& cfg,
                     const RopeParams& rope_params) override {
    in_->qkv_attention(out, qkv, cache, cfg, rope_params);
  }
  void silu_mul(const TensorView& out, const TensorView& gate_up) override { in_->silu_mul(out, gate_up); }
  void add(const TensorView& out, const TensorView& a, const TensorView& b) override { in_->add(out, a, b); }
  void gather_logit_rows(const TensorView& out, const TensorView& x) override { in_->gather_logit_rows(out, x); }
  float abs_max_cols(const TensorView& x, int64_t col, int64_t cols) override { return in_->abs_max_cols(x, col, cols); }

 protected:
  Ops& inner() { return *in_; }

 private:
  std::unique_ptr<Ops> in_;
};

}  // namespace conveyor::testing
