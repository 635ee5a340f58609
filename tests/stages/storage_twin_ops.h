// The CPU twin at a GPU's storage precision: CPU ops that round every activation they store (and
// every 16-bit weight at adoption) to f16 or bf16, as the CUDA backend keeps them, with logits left
// in fp32 and the residual GEMMs rounded once (linear_add). Seeded members add a relative jitter of
// one unit roundoff before each rounding, standing in for the GPU's own rounding differences
// (accumulation order, fused kernels); seed 0 rounds without jitter. With an FP8 KV cache, K is
// quantized from the fp32 rotation, as the fused rope + KV write does. A `defect` plants a mistake
// (tests of the tie rule must reject it).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>

#include "stages/backend.h"
#include "stages/cpu_ops.h"

namespace conveyor::testing {

enum class PlantedDefect { kNone, kKeysNotRotated };

inline float round_to_storage(float x, DType storage) {
  if (storage == DType::kBF16) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    u &= 0xffff0000u;
    std::memcpy(&x, &u, sizeof u);
    return x;
  }
  return static_cast<float>(static_cast<_Float16>(x));
}

inline float unit_roundoff(DType storage) { return storage == DType::kBF16 ? 1.f / 256 : 1.f / 2048; }

class StorageTwinOps final : public Ops {
 public:
  StorageTwinOps(DType storage, int64_t vocab, uint32_t seed, PlantedDefect defect = PlantedDefect::kNone)
      : in_(make_cpu_ops()), storage_(storage), vocab_(vocab), rng_(seed), jitter_(seed ? unit_roundoff(storage) : 0.f),
        defect_(defect) {}

  using Ops::empty;
  Tensor empty(int64_t rows, int64_t cols, DType dt) override { return in_->empty(rows, cols, dt); }
  Tensor adopt(HostTensor&& w) override {
    for (float& x : w.data) x = round_to_storage(x, storage_);
    return in_->adopt(std::move(w));
  }
  Tensor adopt_fp8(Fp8HostWeight&& w) override { return in_->adopt_fp8(std::move(w)); }
  Tensor upload(const float* host, int64_t rows, int64_t cols) override { return in_->upload(host, rows, cols); }
  void download(const TensorView& t, float* host) override { in_->download(t, host); }
  void copy_cols(const TensorView& dst, int64_t dst_col, const TensorView& src, int64_t src_col, int64_t cols) override {
    in_->copy_cols(dst, dst_col, src, src_col, cols);
  }
  std::unique_ptr<KvCache> make_kv_cache(int first, int n, const PagedKvShape& shape, bool fp8) override {
    kv_fp8_ = fp8;
    return in_->make_kv_cache(first, n, shape, fp8);
  }
  void set_batch(const BatchInfo& b) override {
    in_->set_batch(b);
    batch_ = b;
  }
  void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) override {
    in_->embedding(out, table, vocab_size, vocab_start);
    store(out);
  }
  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& w, float eps) override {
    in_->rms_norm(out, x, w, eps);
    store(out);
  }
  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    in_->linear(out, x, w, bias);
    if (out.cols != vocab_) store(out);  // logits stay fp32
  }
  void linear_add(const TensorView& out, const TensorView& x, const TensorView& w) override {
    Tensor y = in_->empty(out.rows, out.cols, out.dtype);
    in_->linear(y.view(), x, w, TensorView{});
    in_->add(out, out, y.view());
    store(out);
  }
  void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) override {
    if (defect_ == PlantedDefect::kKeysNotRotated) {
      Tensor saved = in_->empty(k.rows, k.cols, k.dtype);
      in_->copy_cols(saved.view(), 0, k, 0, k.cols);
      in_->rope(q, k, n_heads, n_kv_heads, p);
      in_->copy_cols(k, 0, saved.view(), 0, k.cols);
    } else {
      in_->rope(q, k, n_heads, n_kv_heads, p);
    }
    store(q);
    if (!kv_fp8_) store(k);
  }
  void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvLayerView& cache, const AttentionConfig& cfg) override {
    in_->attention(out, q, k, v, cache, cfg);
    store(out);
  }
  void silu_mul(const TensorView& out, const TensorView& gate_up) override {
    in_->silu_mul(out, gate_up);
    store(out);
  }
  void add(const TensorView& out, const TensorView& a, const TensorView& b) override {
    in_->add(out, a, b);
    store(out);
  }
  void gather_logit_rows(const TensorView& out, const TensorView& x) override { in_->gather_logit_rows(out, x); }

 private:
  void store(const TensorView& t) {
    std::uniform_real_distribution<float> jitter(-jitter_, jitter_);
    float* x = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i)
      x[i] = round_to_storage(jitter_ != 0 ? x[i] * (1 + jitter(rng_)) : x[i], storage_);
  }

  std::unique_ptr<Ops> in_;
  DType storage_;
  int64_t vocab_;
  std::mt19937 rng_;
  float jitter_;
  PlantedDefect defect_;
  bool kv_fp8_ = false;
};

}  // namespace conveyor::testing
