// Rotary position embedding, HF "rotate_half" (NeoX) convention: dimension i of a head is paired with
// i + head_dim/2 and rotated by angle position * inv_freq[i]. RopeTable computes inv_freq once per
// model from theta and the scaling rule (none, linear, llama3, dynamic NTK), following transformers'
// formulas in fp32 so the angles match the reference to the last bits that matter.
#pragma once

#include <cstdint>
#include <vector>

namespace conveyor {

enum class RopeFreqType { kNone, kLinear, kLlama3, kDynamic };

struct RopeFreqScaling {
  RopeFreqType type = RopeFreqType::kNone;
  float factor = 1.f;                          // linear, llama3, dynamic
  float low_freq_factor = 1.f;                 // llama3
  float high_freq_factor = 4.f;                // llama3
  int original_max_position_embeddings = 8192; // llama3
};

class RopeTable {
 public:
  // max_position_embeddings is the config's; dynamic NTK scales only past it.
  RopeTable(int head_dim, double theta, const RopeFreqScaling& scaling, int max_position_embeddings);

  int head_dim() const { return head_dim_; }
  bool is_dynamic() const { return scaling_.type == RopeFreqType::kDynamic; }

  // The inv_freq for one forward call, [head_dim / 2]. Only dynamic NTK depends on seq_len; like
  // transformers it uses seq_len = (largest position in the call) + 1, and leaves the base theta
  // untouched while seq_len <= max_position_embeddings.
  void inv_freq_for(int seq_len, float* out) const;
  const std::vector<float>& static_inv_freq() const { return inv_freq_; }  // all but dynamic

 private:
  int head_dim_;
  double theta_;
  RopeFreqScaling scaling_;
  int max_position_embeddings_;
  std::vector<float> inv_freq_;
};

// Rotates q and k in place for the given positions. inv_freq comes from the table. For dynamic NTK
// it depends on seq_len: dynamic_seq_len when > 0, else max(positions) + 1, which is what one
// transformers forward call uses. A chunked prefill that must match transformers' single prefill
// passes the whole prompt length; a caller that wants per-sequence scaling calls once per sequence.
void rope_ref(float* q,                  // [tokens, n_heads, head_dim]
              float* k,                  // [tokens, n_kv_heads, head_dim]
              const int32_t* positions,  // [tokens]
              int tokens, int n_heads, int n_kv_heads, const RopeTable& table, int dynamic_seq_len = 0);

}  // namespace conveyor
