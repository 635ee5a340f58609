// How a model's linear layers are quantized: nothing, FP8 (e4m3) made at load by
// `--quantization fp8` (per output channel weights, dynamic per-token activations), or a
// pre-quantized checkpoint: compressed-tensors float-quantized FP8 (per-tensor or per-channel
// `weight_scale`, static `input_scale` or dynamic per-token activations) or `quant_method: fp8`
// (128x128 blocks of `weight_scale_inv`, dequantized at load as HF does), optionally with a per-tensor
// FP8 `kv_cache_scheme` (k_scale/v_scale per layer for the FP8 KV cache). Anything else a
// quantization_config describes is refused by name. The embedding and the LM head are never quantized.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace conveyor {

enum class CheckpointQuant { kNone, kCompressedFp8, kFp8Block };

struct QuantSpec {
  CheckpointQuant checkpoint = CheckpointQuant::kNone;
  bool per_channel = true;     // compressed-tensors: weight_scale [out, 1] (else one [1] per tensor)
  bool static_input = false;   // compressed-tensors: input_scale [1] per linear (else per token)
  int64_t block_rows = 128;    // fp8 blocks: weight_scale_inv[ceil(out / rows), ceil(in / cols)]
  int64_t block_cols = 128;
  bool quantize_at_load = false;  // --quantization fp8 on a checkpoint that is not already FP8
  // compressed-tensors kv_cache_scheme (FP8, per tensor, static): every layer has k_scale/v_scale
  // (weights_kv_scales.h), which --kv-cache-dtype fp8 stores K and V with.
  bool kv_cache_scales = false;

  // Whether the layers' linears run as FP8 GEMMs (their weights are held as e4m3 codes + scales).
  bool fp8_linears() const { return checkpoint == CheckpointQuant::kCompressedFp8 || quantize_at_load; }
  std::string describe() const;  // "none", "fp8 (per-channel, dynamic per-token)", ...
};

// Parses config.json's quantization_config; `src` names the file in messages.
QuantSpec parse_quantization_config(const nlohmann::json& q, const std::string& src);

// Applies model.quantization ("", "none" or "fp8"): "fp8" quantizes at load unless the checkpoint
// already is FP8 (then it is what the checkpoint holds).
void apply_quantization_flag(QuantSpec& q, const std::string& flag);

}  // namespace conveyor
