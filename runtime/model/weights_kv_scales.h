// The per-tensor K and V cache scales a checkpoint may carry per layer for an FP8 KV cache, under the
// names vLLM loads: `model.layers.N.self_attn.k_scale` / `v_scale` (llm-compressor's kv_cache_scheme),
// `...self_attn.k_proj.output_scale` / `v_proj.output_scale` (older compressed-tensors and AutoFP8;
// vLLM's get_cache_scale), `...self_attn.k_proj.k_scale` / `v_proj.v_scale` (ModelOpt) and the deprecated
// `...self_attn.kv_scale` (one scale for both, vLLM's remap). Each is one F32/BF16/F16 value (shape []
// or [1]); a checkpoint has them for every layer or for none. They reach the model as set entries
// `layers.N.k_scale` / `layers.N.v_scale` ([1], fp32, replicated over TP ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "runtime/model/weight_set.h"
#include "runtime/model/weights_layout.h"
#include "runtime/model/weights_source.h"

namespace conveyor {

enum class KvScaleKind { kK, kV };

// The set entry of a layer's scale: "layers.3.k_scale", "layers.3.v_scale".
std::string kv_scale_entry(int64_t layer, KvScaleKind which);

// Whether a checkpoint tensor name is one of the KV scale names above (of any layer).
bool is_kv_scale_name(const std::string& hf);

// The checkpoint names of one layer's K and V scale (the same name twice for a deprecated kv_scale).
struct KvScaleNames {
  std::string k, v;
};

// Every layer's scale names, or none when the checkpoint has no KV scales. Throws naming the tensor
// when only some layers (or only K or only V) have them, when one is not a single float value, or
// when the quantization_config's kv_cache_scheme promises scales the checkpoint lacks.
std::vector<KvScaleNames> find_kv_scales(const ModelSpec& spec, const WeightSource& source);

// Adds the share's `layers.N.k_scale` / `layers.N.v_scale` entries (nothing when names is empty).
void add_kv_scale_entries(WeightSet& set, const std::vector<KvScaleNames>& names, const WeightShare& share,
                          const std::shared_ptr<const WeightSource>& source);

}  // namespace conveyor
