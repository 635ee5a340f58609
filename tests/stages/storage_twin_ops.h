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

#include "tests/stages/forwarding_ops.h"

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

class StorageTwinOps final : public ForwardingOps {
 public:
  StorageTwinOps(DType storage, int64_t vocab, uint32_t seed, PlantedDefect defect = PlantedDefect::kNone)
      : storage_(storage), vocab_(vocab), rng_(seed), jitter_(seed ? unit_roundoff(storage) : 0.f), defect_(defect) {}

  Tensor adopt(HostTensor&& w) override {
    for (float& x : w.data) x = round_to_storage(x, storage_);
    return inner().adopt(std::move(w));
  }
  std::unique_ptr<KvCache> make_kv_cache(int first, int n, const PagedKvShape& shape, bool fp8) override {
    kv_fp8_ = fp8;
    return inner().make_kv_cache(first, n, shape, fp8);
  }
  void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) override {
    inner().embedding(out, table, vocab_size, vocab_start);
    store(out);
  }
  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& w, float eps) override {
    inner().rms_norm(out, x, w, eps);
    store(out);
  }
  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    inner().linear(out, x, w, bias);
    if (out.cols != vocab_) store(out);  // logits stay fp32
  }
  void linear_add(const TensorView& out, const TensorView& x, const TensorView& w) override {
    Tensor y = inner().empty(out.rows, out.cols, out.dtype);
    inner().linear(y.view(), x, w, TensorView{});
    inner().add(out, out, y.view());
    store(out);
  }
  // Split, rope and attention through this class's overrides (Ops' default).
  void qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache, const AttentionConfig& cfg,
                     const RopeParams& rope_params) override {
    Ops::qkv_attention(out, qkv, cache, cfg, rope_params);
  }
  void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) override {
    if (defect_ == PlantedDefect::kKeysNotRotated) {
      Tensor saved = inner().empty(k.rows, k.cols, k.dtype);
      inner().copy_cols(saved.view(), 0, k, 0, k.cols);
      inner().rope(q, k, n_heads, n_kv_heads, p);
      inner().copy_cols(k, 0, saved.view(), 0, k.cols);
    } else {
      inner().rope(q, k, n_heads, n_kv_heads, p);
    }
    store(q);
    if (!kv_fp8_) store(k);
  }
  void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvLayerView& cache, const AttentionConfig& cfg) override {
    inner().attention(out, q, k, v, cache, cfg);
    store(out);
  }
  void silu_mul(const TensorView& out, const TensorView& gate_up) override {
    inner().silu_mul(out, gate_up);
    store(out);
  }
  void add(const TensorView& out, const TensorView& a, const TensorView& b) override {
    inner().add(out, a, b);
    store(out);
  }

 private:
  void store(const TensorView& t) {
    std::uniform_real_distribution<float> jitter(-jitter_, jitter_);
    float* x = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i)
      x[i] = round_to_storage(jitter_ != 0 ? x[i] * (1 + jitter(rng_)) : x[i], storage_);
  }

  DType storage_;
  int64_t vocab_;
  std::mt19937 rng_;
  float jitter_;
  PlantedDefect defect_;
  bool kv_fp8_ = false;
};

}  // namespace conveyor::testing
