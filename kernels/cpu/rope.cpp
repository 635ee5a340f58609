// RoPE reference (see rope.h). inv_freq follows transformers' modeling_rope_utils in fp32; cos and sin
// of the fp32 angle are taken in double and rounded, so they are the correctly rounded fp32 values.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

constexpr int kMaxHeadDim = 1024;  // bounds the per-token scratch on the stack
constexpr double kPi = 3.14159265358979323846;

// 1 / base^(2i/dim) in fp32, as torch computes it from an fp32 exponent.
void default_inv_freq(double base, int dim, float* out) {
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    out[i] = 1.0f / static_cast<float>(std::pow(base, static_cast<double>(exponent)));
  }
}

// Llama 3.1: keep high frequencies, divide low ones by factor, blend in between.
void apply_llama3(const RopeFreqScaling& s, int half, float* inv_freq) {
  const float old_len = static_cast<float>(s.original_max_position_embeddings);
  const float low_wavelen = old_len / s.low_freq_factor;
  const float high_wavelen = old_len / s.high_freq_factor;
  const float two_pi = static_cast<float>(2.0 * kPi);
  for (int i = 0; i < half; ++i) {
    const float f = inv_freq[i];
    const float wavelen = two_pi / f;
    float scaled = wavelen > low_wavelen ? f / s.factor : f;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
      const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      scaled = (1.f - smooth) * scaled / s.factor + smooth * scaled;
    }
    inv_freq[i] = scaled;
  }
}

void rotate_head(float* x, const float* cos_v, const float* sin_v, int half) {
  for (int i = 0; i < half; ++i) {
    const float x1 = x[i];
    const float x2 = x[i + half];
    x[i] = x1 * cos_v[i] - x2 * sin_v[i];
    x[i + half] = x2 * cos_v[i] + x1 * sin_v[i];
  }
}

}  // namespace

RopeTable::RopeTable(int head_dim, double theta, const RopeFreqScaling& scaling, int max_position_embeddings)
    : head_dim_(head_dim), theta_(theta), scaling_(scaling), max_position_embeddings_(max_position_embeddings) {
  CONVEYOR_CHECK(head_dim > 0 && head_dim % 2 == 0 && head_dim <= kMaxHeadDim,
                 "rope: head_dim must be even and in (0, ", kMaxHeadDim, "], got ", head_dim);
  CONVEYOR_CHECK(theta > 0, "rope: rope_theta must be > 0, got ", theta);
  CONVEYOR_CHECK(scaling.type == RopeFreqType::kNone || scaling.factor > 0,
                 "rope: rope_scaling.factor must be > 0, got ", scaling.factor);
  if (scaling.type == RopeFreqType::kLlama3) {
    CONVEYOR_CHECK(scaling.high_freq_factor > scaling.low_freq_factor && scaling.low_freq_factor > 0,
                   "rope: llama3 scaling needs 0 < low_freq_factor < high_freq_factor, got ",
                   scaling.low_freq_factor, " and ", scaling.high_freq_factor);
    CONVEYOR_CHECK(scaling.original_max_position_embeddings > 0,
                   "rope: llama3 scaling needs original_max_position_embeddings > 0");
  }
  if (scaling.type == RopeFreqType::kDynamic) {
    CONVEYOR_CHECK(max_position_embeddings > 0, "rope: dynamic scaling needs max_position_embeddings > 0");
  }
  inv_freq_.resize(head_dim / 2);
  default_inv_freq(theta, head_dim, inv_freq_.data());
  if (scaling.type == RopeFreqType::kLinear) {
    for (float& f : inv_freq_) f /= scaling.factor;
  } else if (scaling.type == RopeFreqType::kLlama3) {
    apply_llama3(scaling, head_dim / 2, inv_freq_.data());
  }
}

void RopeTable::inv_freq_for(int seq_len, float* out) const {
  if (!is_dynamic() || seq_len <= max_position_embeddings_) {
    std::copy(inv_freq_.begin(), inv_freq_.end(), out);
    return;
  }
  // transformers: base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2)), in fp32.
  const float factor = scaling_.factor;
  const float ratio = factor * static_cast<float>(seq_len) / static_cast<float>(max_position_embeddings_) -
                      (factor - 1.f);
  const double exponent = static_cast<double>(head_dim_) / static_cast<double>(head_dim_ - 2);
  const float base = static_cast<float>(theta_ * std::pow(static_cast<double>(ratio), exponent));
  default_inv_freq(base, head_dim_, out);
}

void rope_ref(float* q, float* k, const int32_t* positions, int tokens, int n_heads, int n_kv_heads,
              const RopeTable& table, int dynamic_seq_len) {
  CONVEYOR_CHECK(tokens >= 0 && n_heads > 0 && n_kv_heads > 0, "rope: bad shape tokens=", tokens,
                 " n_heads=", n_heads, " n_kv_heads=", n_kv_heads);
  if (tokens == 0) return;
  const int head_dim = table.head_dim();
  const int half = head_dim / 2;
  int max_pos = 0;
  for (int t = 0; t < tokens; ++t) {
    CONVEYOR_CHECK(positions[t] >= 0, "rope: negative position ", positions[t], " at token ", t);
    max_pos = std::max(max_pos, positions[t]);
  }
  float inv_freq[kMaxHeadDim / 2];
  table.inv_freq_for(dynamic_seq_len > 0 ? dynamic_seq_len : max_pos + 1, inv_freq);

#pragma omp parallel for schedule(static) if (tokens > 4)
  for (int t = 0; t < tokens; ++t) {
    float cos_v[kMaxHeadDim / 2];
    float sin_v[kMaxHeadDim / 2];
    const float pos = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];  // fp32 product, as the reference's fp32 matmul
      cos_v[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_v[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    float* qt = q + static_cast<size_t>(t) * n_heads * head_dim;
    float* kt = k + static_cast<size_t>(t) * n_kv_heads * head_dim;
    for (int h = 0; h < n_heads; ++h) rotate_head(qt + static_cast<size_t>(h) * head_dim, cos_v, sin_v, half);
    for (int h = 0; h < n_kv_heads; ++h) rotate_head(kt + static_cast<size_t>(h) * head_dim, cos_v, sin_v, half);
  }
}

}  // namespace conveyor
