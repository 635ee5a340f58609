// quantization_config parsing (see quantization.h). Every field that would change the math is
// checked: a scheme conveyor does not run the way HF does is an error naming the field, not a
// silently different model.
#include "runtime/model/quantization.h"

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

using json = nlohmann::json;

bool present(const json& j, const char* key) { return j.is_object() && j.contains(key) && !j[key].is_null(); }

std::string text(const json& j, const char* key) {
  return present(j, key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// Only the LM head may be left unquantized: the runtime keeps it (and the embedding) in the
// activation dtype anyway, while a skipped layer linear would need a mixed model.
void check_ignore(const json& q, const char* key, const std::string& where) {
  if (!present(q, key)) return;
  CONVEYOR_CHECK(q[key].is_array(), where, ": ", key, " must be a list of module names");
  for (const json& m : q[key]) {
    const std::string name = m.is_string() ? m.get<std::string>() : m.dump();
    CONVEYOR_CHECK(name == "lm_head" || name == "re:.*lm_head" || name == "re:lm_head", where, ": ", key,
                   " lists '", name, "'; conveyor quantizes every layer linear (only the LM head may be left out)");
  }
}

// One FP8 (e4m3, symmetric, 8-bit float) argument block of compressed-tensors; returns its strategy.
std::string fp8_args(const json& a, const std::string& where) {
  CONVEYOR_CHECK(a.is_object(), where, " must be an object");
  CONVEYOR_CHECK(text(a, "type") == "float" && a.value("num_bits", 0) == 8, where,
                 ": only 8-bit float (FP8 e4m3) quantization is supported, found type '", text(a, "type"),
                 "' with ", a.value("num_bits", 0), " bits");
  CONVEYOR_CHECK(a.value("symmetric", true), where, ": asymmetric FP8 quantization is not supported");
  CONVEYOR_CHECK(!present(a, "group_size") && !present(a, "block_structure"), where,
                 ": group and block strategies are not supported (per-tensor, per-channel, per-token are)");
  return text(a, "strategy");
}

// kv_cache_scheme: llm-compressor's calibrated FP8 KV scales, one static k_scale/v_scale per layer.
bool kv_cache_scheme(const json& kv, const std::string& where) {
  const std::string st = fp8_args(kv, where);
  CONVEYOR_CHECK(st == "tensor", where, ".strategy '", st,
                 "' is not supported: conveyor's FP8 KV cache takes one k_scale and one v_scale per layer (tensor)");
  CONVEYOR_CHECK(!kv.value("dynamic", false), where, ".dynamic must be false (calibrated k_scale/v_scale)");
  return true;
}

QuantSpec parse_compressed_tensors(const json& q, const std::string& src) {
  const std::string where = src + ": quantization_config";
  const std::string format = text(q, "format");
  CONVEYOR_CHECK(format == "float-quantized", where, ".format '", format,
                 "' is not supported; conveyor loads compressed-tensors 'float-quantized' FP8 checkpoints");
  const std::string status = text(q, "quantization_status");
  CONVEYOR_CHECK(status.empty() || status == "compressed", where, ".quantization_status '", status,
                 "' is not supported: the weights must be saved compressed (F8_E4M3)");
  for (const char* key : {"sparsity_config", "transform_config"})
    CONVEYOR_CHECK(!present(q, key), where, ".", key, " is not supported");
  check_ignore(q, "ignore", where + ".ignore");
  CONVEYOR_CHECK(present(q, "config_groups") && q["config_groups"].is_object() && q["config_groups"].size() == 1,
                 where, ".config_groups must hold exactly one group (one scheme for every linear)");
  const json g = q["config_groups"].begin().value();  // a copy: the iterator is a temporary
  const std::string gw = where + ".config_groups." + q["config_groups"].begin().key();
  CONVEYOR_CHECK(present(g, "targets") && g["targets"] == json::array({"Linear"}), gw,
                 ".targets must be [\"Linear\"]");
  CONVEYOR_CHECK(!present(g, "output_activations"), gw, ".output_activations is not supported");
  CONVEYOR_CHECK(present(g, "weights"), gw, ".weights is missing");
  CONVEYOR_CHECK(present(g, "input_activations"), gw,
                 ".input_activations is missing: weight-only FP8 is not supported (FP8 activations are)");
  QuantSpec s;
  s.checkpoint = CheckpointQuant::kCompressedFp8;
  const std::string ws = fp8_args(g["weights"], gw + ".weights");
  CONVEYOR_CHECK(ws == "channel" || ws == "tensor", gw, ".weights.strategy '", ws,
                 "' is not supported (channel or tensor)");
  CONVEYOR_CHECK(!g["weights"].value("dynamic", false), gw, ".weights.dynamic must be false");
  s.per_channel = ws == "channel";
  const json& in = g["input_activations"];
  const std::string is = fp8_args(in, gw + ".input_activations");
  const bool dynamic = in.value("dynamic", false);
  CONVEYOR_CHECK((is == "token" && dynamic) || (is == "tensor" && !dynamic), gw, ".input_activations: strategy '", is,
                 "' with dynamic ", dynamic ? "true" : "false",
                 " is not supported (dynamic per-token, or a static per-tensor input_scale)");
  s.static_input = !dynamic;
  s.kv_cache_scales = present(q, "kv_cache_scheme") && kv_cache_scheme(q["kv_cache_scheme"], where + ".kv_cache_scheme");
  return s;
}

QuantSpec parse_fp8_block(const json& q, const std::string& src) {
  const std::string where = src + ": quantization_config";
  const std::string fmt = text(q, "fmt");
  CONVEYOR_CHECK(fmt.empty() || fmt == "e4m3", where, ".fmt '", fmt, "' is not supported (e4m3)");
  const std::string act = text(q, "activation_scheme");
  CONVEYOR_CHECK(act.empty() || act == "dynamic", where, ".activation_scheme '", act, "' is not supported (dynamic)");
  check_ignore(q, "modules_to_not_convert", where + ".modules_to_not_convert");
  CONVEYOR_CHECK(present(q, "weight_block_size") && q["weight_block_size"].is_array() &&
                     q["weight_block_size"].size() == 2 && q["weight_block_size"][0].is_number_integer() &&
                     q["weight_block_size"][1].is_number_integer() && q["weight_block_size"][0].get<int64_t>() > 0 &&
                     q["weight_block_size"][1].get<int64_t>() > 0,
                 where, ".weight_block_size must be two positive integers, e.g. [128, 128] (per-tensor fp8 is not "
                 "supported)");
  QuantSpec s;
  s.checkpoint = CheckpointQuant::kFp8Block;
  s.block_rows = q["weight_block_size"][0].get<int64_t>();
  s.block_cols = q["weight_block_size"][1].get<int64_t>();
  return s;
}

}  // namespace

std::string QuantSpec::describe() const {
  const std::string dyn = "dynamic per-token activations";
  switch (checkpoint) {
    case CheckpointQuant::kCompressedFp8:
      return std::string("fp8 compressed-tensors, ") + (per_channel ? "per-channel" : "per-tensor") + " weights, " +
             (static_input ? "static input_scale" : dyn) + (kv_cache_scales ? ", per-tensor k/v cache scales" : "");
    case CheckpointQuant::kFp8Block:
      return "fp8 blocks " + std::to_string(block_rows) + "x" + std::to_string(block_cols) +
             (quantize_at_load ? ", dequantized then re-quantized per channel, " + dyn : ", dequantized at load");
    case CheckpointQuant::kNone: break;
  }
  return quantize_at_load ? "fp8 at load, per-channel weights, " + dyn : "none";
}

QuantSpec parse_quantization_config(const json& q, const std::string& src) {
  CONVEYOR_CHECK(q.is_object(), src, ": quantization_config must be an object");
  const std::string method = text(q, "quant_method");
  if (method == "compressed-tensors") return parse_compressed_tensors(q, src);
  if (method == "fp8") return parse_fp8_block(q, src);
  CONVEYOR_THROW(src, ": quantization_config.quant_method '", method,
                 "' is not supported; conveyor loads 'compressed-tensors' FP8 and 'fp8' block checkpoints (or use a "
                 "bf16/f16 checkpoint or GGUF, with --quantization fp8 to quantize at load)");
}

void apply_quantization_flag(QuantSpec& q, const std::string& flag) {
  if (flag.empty() || flag == "none") return;
  CONVEYOR_CHECK(flag == "fp8", "model.quantization '", flag, "' is not supported (none or fp8)");
  q.quantize_at_load = q.checkpoint != CheckpointQuant::kCompressedFp8;
}

}  // namespace conveyor
