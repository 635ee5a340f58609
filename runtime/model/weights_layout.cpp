// Weight names, shapes and TP slices (see weights_layout.h).
#include "runtime/model/weights_layout.h"

#include <algorithm>
#include <sstream>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

struct Names {
  WeightKind kind;
  const char* internal;
  const char* hf;    // layer weights: after "model.layers.N."
  const char* gguf;  // layer weights: after "blk.N."
};

const Names kNames[] = {
    {WeightKind::kEmbedding, "embed_tokens", "model.embed_tokens.weight", "token_embd.weight"},
    {WeightKind::kFinalNorm, "final_norm", "model.norm.weight", "output_norm.weight"},
    {WeightKind::kLmHead, "lm_head", "lm_head.weight", "output.weight"},
    {WeightKind::kAttnNorm, "attn_norm", "input_layernorm.weight", "attn_norm.weight"},
    {WeightKind::kQ, "q_proj", "self_attn.q_proj.weight", "attn_q.weight"},
    {WeightKind::kK, "k_proj", "self_attn.k_proj.weight", "attn_k.weight"},
    {WeightKind::kV, "v_proj", "self_attn.v_proj.weight", "attn_v.weight"},
    {WeightKind::kQBias, "q_bias", "self_attn.q_proj.bias", "attn_q.bias"},
    {WeightKind::kKBias, "k_bias", "self_attn.k_proj.bias", "attn_k.bias"},
    {WeightKind::kVBias, "v_bias", "self_attn.v_proj.bias", "attn_v.bias"},
    {WeightKind::kO, "o_proj", "self_attn.o_proj.weight", "attn_output.weight"},
    {WeightKind::kMlpNorm, "mlp_norm", "post_attention_layernorm.weight", "ffn_norm.weight"},
    {WeightKind::kGate, "gate_proj", "mlp.gate_proj.weight", "ffn_gate.weight"},
    {WeightKind::kUp, "up_proj", "mlp.up_proj.weight", "ffn_up.weight"},
    {WeightKind::kDown, "down_proj", "mlp.down_proj.weight", "ffn_down.weight"},
};

const Names& names_of(WeightKind k) {
  for (const auto& n : kNames)
    if (n.kind == k) return n;
  CONVEYOR_THROW("internal: unknown weight kind ", static_cast<int>(k));
}

std::string layer_prefix(const char* prefix, int64_t layer) { return std::string(prefix) + std::to_string(layer) + "."; }

}  // namespace

bool is_layer_weight(WeightKind k) {
  return k != WeightKind::kEmbedding && k != WeightKind::kFinalNorm && k != WeightKind::kLmHead;
}

std::string internal_name(const WeightId& id) {
  const Names& n = names_of(id.kind);
  return is_layer_weight(id.kind) ? layer_prefix("layers.", id.layer) + n.internal : n.internal;
}

std::string hf_name(const WeightId& id) {
  const Names& n = names_of(id.kind);
  return is_layer_weight(id.kind) ? layer_prefix("model.layers.", id.layer) + n.hf : n.hf;
}

std::string gguf_name(const WeightId& id) {
  const Names& n = names_of(id.kind);
  return is_layer_weight(id.kind) ? layer_prefix("blk.", id.layer) + n.gguf : n.gguf;
}

std::vector<int64_t> full_shape(const ModelSpec& s, const WeightId& id) {
  switch (id.kind) {
    case WeightKind::kEmbedding:
    case WeightKind::kLmHead: return {s.vocab, s.hidden};
    case WeightKind::kFinalNorm:
    case WeightKind::kAttnNorm:
    case WeightKind::kMlpNorm: return {s.hidden};
    case WeightKind::kQ: return {s.q_size(), s.hidden};
    case WeightKind::kK:
    case WeightKind::kV: return {s.kv_size(), s.hidden};
    case WeightKind::kQBias: return {s.q_size()};
    case WeightKind::kKBias:
    case WeightKind::kVBias: return {s.kv_size()};
    case WeightKind::kO: return {s.hidden, s.q_size()};
    case WeightKind::kGate:
    case WeightKind::kUp: return {s.intermediate, s.hidden};
    case WeightKind::kDown: return {s.hidden, s.intermediate};
  }
  return {};
}

WeightShare WeightShare::whole_model(const ModelSpec& spec) {
  WeightShare w;
  w.first_layer = 0;
  w.last_layer = spec.layers;
  w.embedding = w.final_norm = w.lm_head = true;
  return w;
}

std::string WeightShare::describe() const {
  std::ostringstream os;
  os << "layers [" << first_layer << ", " << last_layer << ")" << (embedding ? " +embedding" : "")
     << (final_norm ? " +final_norm" : "") << (lm_head ? " +lm_head" : "") << ", tp " << tp_rank << "/" << tp_size;
  return os.str();
}

std::vector<WeightId> model_weights(const ModelSpec& spec) { return share_weights(spec, WeightShare::whole_model(spec)); }

std::vector<WeightId> share_weights(const ModelSpec& spec, const WeightShare& share) {
  CONVEYOR_CHECK(share.first_layer >= 0 && share.first_layer <= share.last_layer && share.last_layer <= spec.layers,
                 "weight share ", share.describe(), " is outside the model's ", spec.layers, " layers");
  std::vector<WeightId> ids;
  if (share.embedding) ids.push_back({WeightKind::kEmbedding, -1});
  for (int64_t l = share.first_layer; l < share.last_layer; ++l) {
    ids.push_back({WeightKind::kAttnNorm, l});
    for (WeightKind k : {WeightKind::kQ, WeightKind::kK, WeightKind::kV}) ids.push_back({k, l});
    if (spec.qkv_bias)
      for (WeightKind k : {WeightKind::kQBias, WeightKind::kKBias, WeightKind::kVBias}) ids.push_back({k, l});
    for (WeightKind k : {WeightKind::kO, WeightKind::kMlpNorm, WeightKind::kGate, WeightKind::kUp, WeightKind::kDown})
      ids.push_back({k, l});
  }
  if (share.final_norm) ids.push_back({WeightKind::kFinalNorm, -1});
  if (share.lm_head) ids.push_back({WeightKind::kLmHead, -1});
  return ids;
}

void check_tensor_parallel(const ModelSpec& s, int tp) {
  CONVEYOR_CHECK(tp >= 1, "tensor-parallel size must be >= 1, found ", tp);
  CONVEYOR_CHECK(s.heads % tp == 0, "tensor-parallel size ", tp, " does not divide the ", s.heads,
                 " attention heads of ", s.source, "; pick a divisor of ", s.heads);
  CONVEYOR_CHECK(s.kv_heads % tp == 0 || tp % s.kv_heads == 0, "tensor-parallel size ", tp, " and the ", s.kv_heads,
                 " KV heads of ", s.source, " do not divide one another; KV heads can be split or replicated only then");
  CONVEYOR_CHECK(s.intermediate % tp == 0, "tensor-parallel size ", tp, " does not divide the intermediate size ",
                 s.intermediate, " of ", s.source);
}

int64_t kv_heads_per_rank(const ModelSpec& s, int tp) {
  CONVEYOR_CHECK(tp >= 1, "tensor-parallel size must be >= 1, found ", tp);
  return std::max<int64_t>(1, s.kv_heads / tp);
}

HostTensor make_share_header(const ModelSpec& spec, const WeightId& id, const WeightShare& share) {
  HostTensor t;
  t.name = internal_name(id);
  t.full_shape = full_shape(spec, id);
  WeightSlice slice = share_slice(spec, id, share);
  t.split_dim = slice.split_dim;
  t.split_begin = slice.split_dim >= 0 ? slice.begin : 0;
  t.shape = t.full_shape;
  if (slice.split_dim >= 0) t.shape[static_cast<size_t>(slice.split_dim)] = slice.count;
  return t;
}

int64_t vocab_shard_rows(const ModelSpec& spec, int tp_size) { return (spec.vocab + tp_size - 1) / tp_size; }

WeightSlice share_slice(const ModelSpec& s, const WeightId& id, const WeightShare& share) {
  int tp = share.tp_size, r = share.tp_rank;
  CONVEYOR_CHECK(r >= 0 && r < tp, "tensor-parallel rank ", r, " is outside [0, ", tp, ")");
  if (tp == 1) return {};
  check_tensor_parallel(s, tp);
  int64_t q_rows = s.q_size() / tp, ffn_rows = s.intermediate / tp;
  // K/V: a contiguous group of KV heads per rank, or one KV head shared by tp / kv_heads ranks.
  int64_t kv_rows = kv_heads_per_rank(s, tp) * s.head_dim;
  int64_t kv_begin = s.kv_heads >= tp ? r * kv_rows : (r / (tp / s.kv_heads)) * s.head_dim;
  switch (id.kind) {
    case WeightKind::kEmbedding:
    case WeightKind::kLmHead: {
      int64_t rows = vocab_shard_rows(s, tp);
      int64_t begin = std::min(s.vocab, r * rows);
      return {0, begin, std::min(rows, s.vocab - begin)};
    }
    case WeightKind::kQ:
    case WeightKind::kQBias: return {0, r * q_rows, q_rows};
    case WeightKind::kK:
    case WeightKind::kV:
    case WeightKind::kKBias:
    case WeightKind::kVBias: return {0, kv_begin, kv_rows};
    case WeightKind::kO: return {1, r * q_rows, q_rows};
    case WeightKind::kGate:
    case WeightKind::kUp: return {0, r * ffn_rows, ffn_rows};
    case WeightKind::kDown: return {1, r * ffn_rows, ffn_rows};
    default: return {};
  }
}

}  // namespace conveyor
