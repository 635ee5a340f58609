// ModelSpec: the shape and numerics of a decoder-only model (llama, mistral, qwen2), read from an HF
// directory (config.json + generation_config.json), from GGUF metadata, or from a configs/models/*.yaml
// preset with config.json's keys. Anything conveyor does not implement (unknown rope type, partial
// rotary, attention bias on llama, a quantization_config other than FP8) is refused here, by name,
// rather than silently run wrong. Invariant after parsing: heads % kv_heads == 0, all sizes > 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/model/quantization.h"

namespace conveyor {

class GgufFile;

enum class Architecture { kLlama, kMistral, kQwen2 };
const char* architecture_name(Architecture a);

enum class RopeScalingType { kNone, kLinear, kLlama3, kDynamic };
const char* rope_scaling_name(RopeScalingType t);

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                   // llama3
  double high_freq_factor = 4.0;                  // llama3
  int64_t original_max_position_embeddings = 0;   // llama3
};

// Sampling defaults from generation_config.json; unset fields leave the request's own defaults.
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::optional<bool> do_sample;
};

struct ModelSpec {
  Architecture architecture = Architecture::kLlama;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;  // explicit in the config, or hidden / heads
  int64_t vocab = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 0;
  std::optional<int64_t> sliding_window;  // set only when the model would use one (attention masks it)
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // qwen2
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::string torch_dtype;  // "bfloat16", "float16", "float32", or "" when unknown (GGUF)
  GenerationDefaults generation;
  QuantSpec quant;  // quantization_config, and model.quantization once applied
  std::string source;  // where it came from, for messages

  // Refuses a context length longer than max_position_embeddings.
  void check_context(int64_t max_model_len) const;
  // The context length a run uses: `requested` (model.max_model_len) checked, or the model's own when 0.
  int64_t context_len(int64_t requested) const;

  int64_t q_size() const { return heads * head_dim; }
  int64_t kv_size() const { return kv_heads * head_dim; }
  // Parameters of the whole model (embedding, layers, final norm, LM head unless tied).
  int64_t parameter_count() const;
  std::string summary() const;  // multi-line, for `conveyor inspect`
};

// config.json (as parsed JSON); `source` names the file in messages.
ModelSpec model_spec_from_config_json(const nlohmann::json& config, const std::string& source);
// Overlays generation_config.json: eos list, bos, sampling defaults.
void apply_generation_config(ModelSpec& spec, const nlohmann::json& gen, const std::string& source);
// An HF model directory: config.json, and generation_config.json when present.
ModelSpec model_spec_from_hf_dir(const std::string& dir);
// configs/models/*.yaml: config.json's keys written as YAML.
ModelSpec model_spec_from_yaml(const std::string& path);
ModelSpec model_spec_from_gguf(const GgufFile& gguf);
// Picks the reader by path: a directory, a .gguf file, a .yaml/.yml preset or a config.json.
ModelSpec load_model_spec(const std::string& path);

}  // namespace conveyor
