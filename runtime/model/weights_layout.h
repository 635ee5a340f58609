// The one internal naming of model weights, their names in HF checkpoints and GGUF files, their full
// shapes, and which slice of each a rank holds. HF layout is canonical: linear weights are
// [out_features, in_features]. Splits (Megatron style): Q/K/V/gate/up and the QKV biases by output
// rows (K/V by KV heads, replicated when tp > kv heads), O/down by input columns, embedding and LM
// head by vocab rows (ceil(vocab/tp) per rank, the last shard shorter), norms replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/host_tensor.h"
#include "runtime/model/spec.h"

namespace conveyor {

enum class WeightKind {
  kEmbedding, kFinalNorm, kLmHead,
  kAttnNorm, kQ, kK, kV, kQBias, kKBias, kVBias, kO, kMlpNorm, kGate, kUp, kDown,
};

struct WeightId {
  WeightKind kind = WeightKind::kEmbedding;
  int64_t layer = -1;  // -1 for embedding, final norm and LM head
};

bool is_layer_weight(WeightKind k);
std::string internal_name(const WeightId& id);  // "embed_tokens", "layers.3.q_proj", ...
std::string hf_name(const WeightId& id);        // "model.layers.3.self_attn.q_proj.weight", ...
std::string gguf_name(const WeightId& id);      // "blk.3.attn_q.weight", ...
std::vector<int64_t> full_shape(const ModelSpec& spec, const WeightId& id);

// What one rank holds: a stage's layers [first_layer, last_layer), the pieces at the ends of the
// pipeline, and a tensor-parallel rank.
struct WeightShare {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  bool embedding = false;
  bool final_norm = false;
  bool lm_head = false;
  int tp_rank = 0;
  int tp_size = 1;

  static WeightShare whole_model(const ModelSpec& spec);
  std::string describe() const;
};

// Every weight of the model (one layer after another), and those a share holds.
std::vector<WeightId> model_weights(const ModelSpec& spec);
std::vector<WeightId> share_weights(const ModelSpec& spec, const WeightShare& share);

// The slice of a weight one share holds: rows or columns [begin, begin + count) along split_dim,
// or the whole tensor when split_dim is -1.
struct WeightSlice {
  int split_dim = -1;
  int64_t begin = 0;
  int64_t count = 0;
};
WeightSlice share_slice(const ModelSpec& spec, const WeightId& id, const WeightShare& share);

// The header of one weight's share: name, shapes and split filled in, data left empty (lazy sets
// allocate it only when the tensor is read).
HostTensor make_share_header(const ModelSpec& spec, const WeightId& id, const WeightShare& share);

// Rows per vocab shard: ceil(vocab / tp). Shard r holds rows [r*S, min(vocab, (r+1)*S)); consumers
// that need equal shards pad the last one themselves (with -inf logits, not zero rows).
int64_t vocab_shard_rows(const ModelSpec& spec, int tp_size);

// Throws unless `spec` can be split over tp_size ranks (heads, KV heads, intermediate divisible).
void check_tensor_parallel(const ModelSpec& spec, int tp_size);

// KV heads each of tp_size ranks holds under the Megatron split: kv_heads / tp when tp divides them,
// else one head replicated over tp / kv_heads ranks (check_tensor_parallel says which sizes are legal).
int64_t kv_heads_per_rank(const ModelSpec& spec, int tp_size);

}  // namespace conveyor
