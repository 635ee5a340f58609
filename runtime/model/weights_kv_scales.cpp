// KV cache scales of a checkpoint (see weights_kv_scales.h). A layer's names are tried in vLLM's order of
// current to legacy naming; the first pair present wins.
#include "runtime/model/weights_kv_scales.h"

#include <array>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {
namespace {

std::string attn(int64_t layer) { return "model.layers." + std::to_string(layer) + ".self_attn."; }

// The naming schemes, newest first.
std::vector<KvScaleNames> candidates(int64_t layer) {
  const std::string a = attn(layer);
  return {{a + "k_scale", a + "v_scale"},
          {a + "k_proj.output_scale", a + "v_proj.output_scale"},
          {a + "k_proj.k_scale", a + "v_proj.v_scale"},
          {a + "kv_scale", a + "kv_scale"}};
}

constexpr std::array<const char*, 7> kSuffixes = {
    ".self_attn.k_scale",           ".self_attn.v_scale",          ".self_attn.k_proj.output_scale",
    ".self_attn.v_proj.output_scale", ".self_attn.k_proj.k_scale", ".self_attn.v_proj.v_scale",
    ".self_attn.kv_scale"};

void check_scalar(const WeightSource& source, const std::string& name) {
  const SourceTensor& t = source.at(name);
  CONVEYOR_CHECK(t.numel() == 1 && t.shape.size() <= 1, "KV cache scale '", name, "' in '", t.file,
                 "' must hold one value (shape [] or [1]); conveyor's FP8 KV cache takes per-tensor scales");
  CONVEYOR_CHECK(t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16", "KV cache scale '", name, "' in '",
                 t.file, "' is ", t.dtype, "; scales must be F32, BF16 or F16");
}

// The names layer `layer` uses, or an empty pair when it has none; throws on half a pair.
KvScaleNames layer_names(const WeightSource& source, int64_t layer) {
  for (const KvScaleNames& c : candidates(layer)) {
    const bool k = source.find(c.k) != nullptr, v = source.find(c.v) != nullptr;
    CONVEYOR_CHECK(k == v, "checkpoint '", source.path(), "' has '", k ? c.k : c.v, "' but not '", k ? c.v : c.k,
                   "'; an FP8 KV cache needs both scales of a layer");
    if (!k) continue;
    check_scalar(source, c.k);
    check_scalar(source, c.v);
    return c;
  }
  return {};
}

}  // namespace

std::string kv_scale_entry(int64_t layer, KvScaleKind which) {
  return "layers." + std::to_string(layer) + (which == KvScaleKind::kK ? ".k_scale" : ".v_scale");
}

bool is_kv_scale_name(const std::string& hf) {
  if (hf.rfind("model.layers.", 0) != 0) return false;
  for (const char* s : kSuffixes)
    if (ends_with(hf, s)) return true;
  return false;
}

std::vector<KvScaleNames> find_kv_scales(const ModelSpec& spec, const WeightSource& source) {
  std::vector<KvScaleNames> names;
  int64_t with = 0;
  for (int64_t l = 0; l < spec.layers; ++l) {
    names.push_back(layer_names(source, l));
    with += names.back().k.empty() ? 0 : 1;
  }
  if (with == 0) {
    CONVEYOR_CHECK(!spec.quant.kv_cache_scales, "checkpoint '", source.path(), "': its quantization_config has a ",
                   "kv_cache_scheme, but no layer has k_scale/v_scale (e.g. '", candidates(0)[0].k, "')");
    return {};
  }
  for (int64_t l = 0; l < spec.layers; ++l)
    CONVEYOR_CHECK(!names[static_cast<size_t>(l)].k.empty(), "checkpoint '", source.path(), "' has KV cache scales for ",
                   with, " of ", spec.layers, " layers but none for layer ", l, " (e.g. '", candidates(l)[0].k,
                   "'); a checkpoint needs them for every layer or none");
  return names;
}

void add_kv_scale_entries(WeightSet& set, const std::vector<KvScaleNames>& names, const WeightShare& share,
                          const std::shared_ptr<const WeightSource>& source) {
  if (names.empty()) return;
  for (int64_t l = share.first_layer; l < share.last_layer; ++l) {
    for (KvScaleKind which : {KvScaleKind::kK, KvScaleKind::kV}) {
      HostTensor h;
      h.name = kv_scale_entry(l, which);
      h.full_shape = {1};
      h.shape = {1};
      const KvScaleNames& n = names.at(static_cast<size_t>(l));
      const std::string hf = which == KvScaleKind::kK ? n.k : n.v;
      set.add(h, [source, hf](const HostTensor&, float* out) { source->read_range(hf, 0, 1, out); });
    }
  }
}

}  // namespace conveyor
