// FP8 checkpoint companions (see weights_fp8.h). Per-channel scales follow their weight's row split
// (column-parallel linears); row-parallel linears split input columns, so every rank holds all of
// their output-channel scales, and per-tensor scales are replicated.
#include "runtime/model/weights_fp8.h"

#include <algorithm>
#include <set>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/weights_kv_scales.h"

namespace conveyor {
namespace {

constexpr WeightKind kLinears[] = {WeightKind::kQ,    WeightKind::kK,  WeightKind::kV,   WeightKind::kO,
                                   WeightKind::kGate, WeightKind::kUp, WeightKind::kDown};

std::string hf_base(const WeightId& id) {
  std::string n = hf_name(id);
  return n.substr(0, n.size() - std::string("weight").size());  // "model.layers.0.self_attn.q_proj."
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_scale_dtype(const std::string& d) { return d == "F32" || d == "BF16" || d == "F16"; }

}  // namespace

bool is_quantized_linear(WeightKind k) { return std::find(std::begin(kLinears), std::end(kLinears), k) != std::end(kLinears); }

std::vector<Fp8Companion> fp8_companions(const ModelSpec& spec, const WeightId& id) {
  const QuantSpec& q = spec.quant;
  if (q.checkpoint == CheckpointQuant::kNone || !is_quantized_linear(id.kind)) return {};
  const std::vector<int64_t> shape = full_shape(spec, id);
  const std::string base = hf_base(id);
  if (q.checkpoint == CheckpointQuant::kFp8Block)
    return {{base + "weight_scale_inv", "weight_scale_inv",
             {ceil_div(shape[0], q.block_rows), ceil_div(shape[1], q.block_cols)}}};
  std::vector<Fp8Companion> out;
  out.push_back({base + "weight_scale", "weight_scale",
                 q.per_channel ? std::vector<int64_t>{shape[0], 1} : std::vector<int64_t>{1}});
  if (q.static_input) out.push_back({base + "input_scale", "input_scale", {1}});
  return out;
}

void check_fp8_dtypes(const ModelSpec& spec, const WeightSource& source) {
  std::set<std::string> fp8, scales;
  for (const WeightId& id : model_weights(spec)) {
    if (!is_quantized_linear(id.kind)) continue;
    fp8.insert(hf_name(id));
    for (const Fp8Companion& c : fp8_companions(spec, id)) scales.insert(c.hf);
  }
  const SourceTensor* first = nullptr;
  for (const SourceTensor& t : source.tensors()) {
    if (fp8.count(t.name)) {
      CONVEYOR_CHECK(t.dtype == "F8_E4M3", "checkpoint '", source.path(), "': quantized linear '", t.name, "' is ",
                     t.dtype, ", but its quantization_config (", spec.quant.describe(), ") says F8_E4M3");
    } else if (scales.count(t.name)) {
      CONVEYOR_CHECK(is_scale_dtype(t.dtype), "checkpoint '", source.path(), "': scale '", t.name, "' is ", t.dtype,
                     "; scales must be F32, BF16 or F16");
    } else if (!ends_with(t.name, "rotary_emb.inv_freq") && !is_kv_scale_name(t.name)) {
      if (!first) first = &t;
      CONVEYOR_CHECK(t.dtype == first->dtype, "checkpoint '", source.path(), "': unquantized tensor '", t.name,
                     "' is ", t.dtype, " but '", first->name, "' is ", first->dtype,
                     "; conveyor expects one dtype for the tensors an FP8 checkpoint does not quantize");
    }
  }
}

void add_fp8_scale_entries(WeightSet& set, const ModelSpec& spec, const WeightShare& share,
                           const std::shared_ptr<const WeightSource>& source) {
  if (spec.quant.checkpoint != CheckpointQuant::kCompressedFp8) return;
  for (const WeightId& id : share_weights(spec, share)) {
    if (!is_quantized_linear(id.kind)) continue;
    const HostTensor weight = make_share_header(spec, id, share);
    for (const Fp8Companion& c : fp8_companions(spec, id)) {
      HostTensor h;
      h.name = internal_name(id) + "." + c.suffix;
      h.full_shape = {c.shape[0]};
      h.shape = h.full_shape;
      if (c.suffix == "weight_scale" && spec.quant.per_channel && weight.split_dim == 0) {
        h.split_dim = 0;
        h.split_begin = weight.split_begin;
        h.shape = {weight.shape[0]};
      }
      const std::string name = c.hf;
      set.add(h, [source, name](const HostTensor& t, float* out) {
        source->read_range(name, t.split_begin, t.split_begin + t.shape[0], out);
      });
    }
  }
}

void apply_block_scales(const ModelSpec& spec, const WeightSource& source, const WeightId& id, int64_t row,
                        int64_t col0, int64_t width, float* out) {
  const QuantSpec& q = spec.quant;
  const Fp8Companion c = fp8_companions(spec, id).at(0);
  const int64_t block_cols = c.shape[1];
  std::vector<float> scales(static_cast<size_t>(block_cols));
  const int64_t first = (row / q.block_rows) * block_cols;
  source.read_range(c.hf, first, first + block_cols, scales.data());
  for (int64_t j = 0; j < width; ++j) out[j] *= scales[static_cast<size_t>((col0 + j) / q.block_cols)];
}

}  // namespace conveyor
