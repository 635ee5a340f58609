// The FP8 companions of a pre-quantized HF checkpoint's layer linears: `<linear>.weight_scale`
// (per-channel [out, 1] or per-tensor [1]) and `<linear>.input_scale` ([1], static activations) of
// compressed-tensors, `<linear>.weight_scale_inv` ([ceil(out / 128), ceil(in / 128)]) of fp8 blocks.
// Compressed-tensors scales reach the model as extra set entries named `<internal>.weight_scale` /
// `<internal>.input_scale` (the weight itself reads as its exact e4m3 values); block scales are
// applied while the weight is read, so a block checkpoint loads as its dequantized weights.
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

bool is_quantized_linear(WeightKind k);  // q, k, v, o, gate, up, down

struct Fp8Companion {
  std::string hf;                  // checkpoint name
  std::string suffix;              // "weight_scale", "input_scale", "weight_scale_inv"
  std::vector<int64_t> shape;      // expected full shape
};
// The companions a checkpoint of spec.quant must hold for weight `id` (none for other weights).
std::vector<Fp8Companion> fp8_companions(const ModelSpec& spec, const WeightId& id);

// Checks the dtypes of an FP8 checkpoint: quantized linears F8_E4M3, their scales F32/BF16/F16,
// everything else one float dtype (compressed-tensors keeps norms and embeddings in bf16).
void check_fp8_dtypes(const ModelSpec& spec, const WeightSource& source);

// Adds the share's `<internal>.weight_scale` / `.input_scale` entries (compressed-tensors) to set.
void add_fp8_scale_entries(WeightSet& set, const ModelSpec& spec, const WeightShare& share,
                           const std::shared_ptr<const WeightSource>& source);

// Multiplies out[0, width), elements [col0, col0 + width) of row `row` of block-quantized weight
// `id`, by their weight_scale_inv blocks.
void apply_block_scales(const ModelSpec& spec, const WeightSource& source, const WeightId& id, int64_t row,
                        int64_t col0, int64_t width, float* out);

}  // namespace conveyor
