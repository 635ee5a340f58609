// ModelSpec readers (see runtime/model/spec.h). config.json, YAML presets and GGUF metadata all end in the
// same validate() so every source is held to the same rules.
#include "runtime/model/spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/gguf_file.h"

namespace conveyor {
namespace {

using json = nlohmann::json;

bool has_value(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

int64_t get_int(const json& j, const char* key, const std::string& src, std::optional<int64_t> fallback = {}) {
  if (!has_value(j, key)) {
    CONVEYOR_CHECK(fallback.has_value(), src, ": required key '", key, "' is missing");
    return *fallback;
  }
  CONVEYOR_CHECK(j[key].is_number_integer(), src, ": key '", key, "' must be an integer, found ", j[key].dump());
  return j[key].get<int64_t>();
}

double get_num(const json& j, const char* key, const std::string& src, double fallback) {
  if (!has_value(j, key)) return fallback;
  CONVEYOR_CHECK(j[key].is_number(), src, ": key '", key, "' must be a number, found ", j[key].dump());
  return j[key].get<double>();
}

bool get_bool(const json& j, const char* key, const std::string& src, bool fallback) {
  if (!has_value(j, key)) return fallback;
  CONVEYOR_CHECK(j[key].is_boolean(), src, ": key '", key, "' must be true or false, found ", j[key].dump());
  return j[key].get<bool>();
}

// A token id field may be an integer or a list of integers (eos in Llama 3 configs).
std::vector<int64_t> get_ids(const json& j, const char* key, const std::string& src) {
  std::vector<int64_t> ids;
  if (!has_value(j, key)) return ids;
  const json& v = j[key];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  CONVEYOR_CHECK(v.is_array(), src, ": key '", key, "' must be an integer or a list of integers, found ", v.dump());
  for (const json& e : v) {
    CONVEYOR_CHECK(e.is_number_integer(), src, ": key '", key, "' holds a non-integer ", e.dump());
    ids.push_back(e.get<int64_t>());
  }
  return ids;
}

Architecture parse_architecture(const json& c, const std::string& src) {
  std::string type = c.value("model_type", std::string());
  if (type.empty() && c.contains("architectures") && c["architectures"].is_array() && !c["architectures"].empty()) {
    std::string a = c["architectures"][0].get<std::string>();
    if (a == "LlamaForCausalLM") type = "llama";
    if (a == "MistralForCausalLM") type = "mistral";
    if (a == "Qwen2ForCausalLM") type = "qwen2";
    if (type.empty()) type = a;
  }
  if (type == "llama") return Architecture::kLlama;
  if (type == "mistral") return Architecture::kMistral;
  if (type == "qwen2") return Architecture::kQwen2;
  CONVEYOR_THROW(src, ": model_type '", type, "' is not supported", did_you_mean(type, {"llama", "mistral", "qwen2"}),
                 "; conveyor runs llama, mistral and qwen2 architectures");
}

// `key` is "rope_scaling" (transformers 4) or "rope_parameters" (transformers 5, which also moves
// rope_theta inside it); both hold the same type and factors.
RopeScaling parse_rope_scaling(const json& c, const std::string& key, const std::string& src) {
  RopeScaling rs;
  if (!has_value(c, key.c_str())) return rs;
  const json& r = c[key];
  CONVEYOR_CHECK(r.is_object(), src, ": ", key, " must be an object or null, found ", r.dump());
  std::string type = r.value("rope_type", r.value("type", std::string()));
  std::string where = src + ": " + key;
  if (type == "default" || type.empty()) return rs;
  rs.factor = get_num(r, "factor", where, 0.0);
  CONVEYOR_CHECK(rs.factor > 0, where, ".factor must be > 0, found ", r.value("factor", json()).dump());
  if (type == "linear") {
    rs.type = RopeScalingType::kLinear;
  } else if (type == "dynamic") {
    rs.type = RopeScalingType::kDynamic;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::kLlama3;
    rs.low_freq_factor = get_num(r, "low_freq_factor", where, 1.0);
    rs.high_freq_factor = get_num(r, "high_freq_factor", where, 4.0);
    rs.original_max_position_embeddings = get_int(r, "original_max_position_embeddings", where);
    CONVEYOR_CHECK(rs.high_freq_factor > rs.low_freq_factor, where, ": high_freq_factor must exceed low_freq_factor");
  } else {
    CONVEYOR_THROW(where, ": rope type '", type, "' is not implemented",
                   did_you_mean(type, {"default", "linear", "dynamic", "llama3"}),
                   " (conveyor implements default, linear, dynamic and llama3)");
  }
  return rs;
}

// transformers 5 writes rope_theta and the scaling into one `rope_parameters` object (rope_type
// "default" when unscaled) instead of top-level rope_theta + rope_scaling. Kept apart from
// parse_rope_scaling so that the older keys keep their own reader; the scaling fields are the same.
void apply_rope_parameters(const json& c, ModelSpec& s, const std::string& src) {
  if (!has_value(c, "rope_parameters")) return;
  const json& r = c["rope_parameters"];
  const std::string where = src + ": rope_parameters";
  CONVEYOR_CHECK(r.is_object(), where, " must be an object or null, found ", r.dump());
  CONVEYOR_CHECK(r.contains("rope_type") || r.contains("rope_theta"), where, " has neither rope_type nor rope_theta ",
                 "(per-layer-type rope parameters are not implemented): ", r.dump());
  const double prf = get_num(r, "partial_rotary_factor", where, 1.0);
  CONVEYOR_CHECK(prf == 1.0, where, ".partial_rotary_factor ", prf, " (partial rotary) is not implemented");
  if (has_value(c, "rope_scaling")) {  // both written: they must agree, or one would be ignored
    const json& old = c["rope_scaling"];
    std::string old_type = old.is_object() ? old.value("rope_type", old.value("type", std::string())) : "";
    if (old_type.empty()) old_type = "default";
    CONVEYOR_CHECK(old_type == r.value("rope_type", std::string("default")), src,
                   ": rope_scaling and rope_parameters disagree on the rope type; keep one of them");
  }
  s.rope_theta = get_num(r, "rope_theta", where, s.rope_theta);
  s.rope_scaling = parse_rope_scaling(c, "rope_parameters", src);
}

// Features whose presence would change the math: refuse instead of running a different model.
void refuse_unimplemented(const json& c, Architecture arch, const std::string& src) {
  std::string act = c.value("hidden_act", std::string("silu"));
  CONVEYOR_CHECK(act == "silu", src, ": hidden_act '", act, "' is not implemented (conveyor implements silu)");
  double prf = get_num(c, "partial_rotary_factor", src, 1.0);
  CONVEYOR_CHECK(prf == 1.0, src, ": partial_rotary_factor ", prf, " (partial rotary) is not implemented");
  CONVEYOR_CHECK(!(arch != Architecture::kQwen2 && get_bool(c, "attention_bias", src, false)), src,
                 ": attention_bias: true on ", architecture_name(arch), " is not implemented");
  CONVEYOR_CHECK(!get_bool(c, "mlp_bias", src, false), src, ": mlp_bias: true is not implemented");
}

std::optional<int64_t> parse_sliding_window(const json& c, Architecture arch, int64_t max_pos, const std::string& src) {
  if (!has_value(c, "sliding_window")) return std::nullopt;
  if (arch == Architecture::kQwen2 && !get_bool(c, "use_sliding_window", src, false)) return std::nullopt;
  if (arch == Architecture::kLlama) return std::nullopt;
  int64_t w = get_int(c, "sliding_window", src);
  if (w >= max_pos) return std::nullopt;  // a window as long as the context never slides
  return w;
}

void validate(const ModelSpec& s) {
  const std::string& src = s.source;
  for (auto [v, name] : {std::pair{s.hidden, "hidden size"}, {s.intermediate, "intermediate size"},
                         {s.layers, "layer count"}, {s.heads, "head count"}, {s.kv_heads, "KV head count"},
                         {s.head_dim, "head_dim"}, {s.vocab, "vocab size"},
                         {s.max_position_embeddings, "max_position_embeddings"}})
    CONVEYOR_CHECK(v > 0, src, ": ", name, " must be positive, found ", v);
  CONVEYOR_CHECK(s.heads % s.kv_heads == 0, src, ": ", s.heads, " attention heads are not a multiple of ", s.kv_heads,
                 " KV heads");
  CONVEYOR_CHECK(s.head_dim % 2 == 0, src, ": head_dim ", s.head_dim, " must be even for rotary embeddings");
  CONVEYOR_CHECK(s.rms_norm_eps > 0, src, ": rms_norm_eps must be positive");
  CONVEYOR_CHECK(s.rope_theta > 0, src, ": rope_theta must be positive");
}

}  // namespace

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kMistral: return "mistral";
    case Architecture::kQwen2: return "qwen2";
  }
  return "?";
}

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kDynamic: return "dynamic";
  }
  return "?";
}

ModelSpec model_spec_from_config_json(const json& c, const std::string& src) {
  CONVEYOR_CHECK(c.is_object(), src, ": must be a JSON object");
  ModelSpec s;
  s.source = src;
  s.architecture = parse_architecture(c, src);
  refuse_unimplemented(c, s.architecture, src);
  s.hidden = get_int(c, "hidden_size", src);
  s.intermediate = get_int(c, "intermediate_size", src);
  s.layers = get_int(c, "num_hidden_layers", src);
  s.heads = get_int(c, "num_attention_heads", src);
  s.kv_heads = get_int(c, "num_key_value_heads", src, s.heads);
  CONVEYOR_CHECK(s.heads > 0, src, ": num_attention_heads must be positive");
  if (has_value(c, "head_dim")) {
    s.head_dim = get_int(c, "head_dim", src);
  } else {
    CONVEYOR_CHECK(s.hidden % s.heads == 0, src, ": hidden_size ", s.hidden, " is not divisible by ", s.heads,
                   " heads; set head_dim explicitly");
    s.head_dim = s.hidden / s.heads;
  }
  s.vocab = get_int(c, "vocab_size", src);
  s.rms_norm_eps = get_num(c, "rms_norm_eps", src, 1e-6);
  s.rope_theta = get_num(c, "rope_theta", src, 10000.0);
  s.rope_scaling = parse_rope_scaling(c, "rope_scaling", src);
  apply_rope_parameters(c, s, src);
  s.max_position_embeddings = get_int(c, "max_position_embeddings", src);
  s.sliding_window = parse_sliding_window(c, s.architecture, s.max_position_embeddings, src);
  s.tie_word_embeddings = get_bool(c, "tie_word_embeddings", src, false);
  s.qkv_bias = s.architecture == Architecture::kQwen2;
  if (has_value(c, "bos_token_id")) s.bos_token_id = get_int(c, "bos_token_id", src);
  s.eos_token_ids = get_ids(c, "eos_token_id", src);
  if (has_value(c, "torch_dtype")) s.torch_dtype = c["torch_dtype"].get<std::string>();
  else if (has_value(c, "dtype") && c["dtype"].is_string()) s.torch_dtype = c["dtype"].get<std::string>();
  if (has_value(c, "quantization_config")) s.quant = parse_quantization_config(c["quantization_config"], src);
  validate(s);
  return s;
}

void apply_generation_config(ModelSpec& s, const json& g, const std::string& src) {
  CONVEYOR_CHECK(g.is_object(), src, ": must be a JSON object");
  std::vector<int64_t> eos = get_ids(g, "eos_token_id", src);
  if (!eos.empty()) s.eos_token_ids = eos;
  if (has_value(g, "bos_token_id")) s.bos_token_id = get_int(g, "bos_token_id", src);
  if (has_value(g, "temperature")) s.generation.temperature = get_num(g, "temperature", src, 1.0);
  if (has_value(g, "top_p")) s.generation.top_p = get_num(g, "top_p", src, 1.0);
  if (has_value(g, "top_k")) s.generation.top_k = get_int(g, "top_k", src);
  if (has_value(g, "repetition_penalty")) s.generation.repetition_penalty = get_num(g, "repetition_penalty", src, 1.0);
  if (has_value(g, "do_sample")) s.generation.do_sample = get_bool(g, "do_sample", src, false);
}

namespace {

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good(), "cannot open '", path, "'; check the path");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    CONVEYOR_THROW("'", path, "' is not valid JSON: ", e.what());
  }
}

// YAML scalars carry no types: plain scalars become null/bool/int/float when they read as one;
// quoted scalars (tag "!") stay strings.
json yaml_to_json(const YAML::Node& n, const std::string& src) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e, src));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second, src);
      return o;
    }
    case YAML::NodeType::Scalar: break;
  }
  std::string s = n.Scalar();
  if (n.Tag() == "!") return s;
  if (s == "~" || s == "null") return nullptr;
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  try {
    size_t used = 0;
    long long i = std::stoll(s, &used);
    if (used == s.size()) return static_cast<int64_t>(i);
    double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

std::string gguf_arch_key(const std::string& arch, const char* key) { return arch + "." + key; }

}  // namespace

ModelSpec model_spec_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path config = fs::path(dir) / "config.json";
  CONVEYOR_CHECK(fs::exists(config), "'", dir, "' has no config.json; pass an HF model directory, a .gguf file or a ",
                 "configs/models/*.yaml preset");
  ModelSpec s = model_spec_from_config_json(read_json_file(config.string()), config.string());
  fs::path gen = fs::path(dir) / "generation_config.json";
  if (fs::exists(gen)) apply_generation_config(s, read_json_file(gen.string()), gen.string());
  return s;
}

ModelSpec model_spec_from_yaml(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    CONVEYOR_THROW("cannot read model preset '", path, "': ", e.what());
  }
  json c = yaml_to_json(root, path);
  ModelSpec s = model_spec_from_config_json(c, path);
  if (c.contains("generation_config")) apply_generation_config(s, c["generation_config"], path + ": generation_config");
  return s;
}

ModelSpec model_spec_from_gguf(const GgufFile& g) {
  ModelSpec s;
  s.source = g.path();
  std::string arch = g.get_string("general.architecture");
  if (arch == "llama") s.architecture = Architecture::kLlama;
  else if (arch == "qwen2") s.architecture = Architecture::kQwen2;
  else CONVEYOR_THROW("GGUF file '", g.path(), "': architecture '", arch, "' is not supported (llama, qwen2)");
  auto key = [&](const char* k) { return gguf_arch_key(arch, k); };
  s.hidden = g.get_u32(key("embedding_length"));
  s.intermediate = g.get_u32(key("feed_forward_length"));
  s.layers = g.get_u32(key("block_count"));
  s.heads = g.get_u32(key("attention.head_count"));
  s.kv_heads = g.has(key("attention.head_count_kv")) ? g.get_u32(key("attention.head_count_kv")) : s.heads;
  CONVEYOR_CHECK(s.heads > 0, "GGUF file '", g.path(), "': ", key("attention.head_count"), " is 0");
  s.head_dim = g.has(key("attention.key_length")) ? g.get_u32(key("attention.key_length")) : s.hidden / s.heads;
  if (g.has(key("attention.value_length")))
    CONVEYOR_CHECK(g.get_u32(key("attention.value_length")) == s.head_dim, "GGUF file '", g.path(),
                   "': value_length differs from key_length; not implemented");
  if (g.has(key("rope.dimension_count")))
    CONVEYOR_CHECK(g.get_u32(key("rope.dimension_count")) == s.head_dim, "GGUF file '", g.path(), "': ",
                   key("rope.dimension_count"), " ", g.get_u32(key("rope.dimension_count")), " != head_dim ",
                   s.head_dim, ": partial rotary is not implemented");
  const GgufTensorInfo* embd = g.find_tensor("token_embd.weight");
  if (g.has(key("vocab_size"))) s.vocab = g.get_u32(key("vocab_size"));
  else if (g.has("tokenizer.ggml.tokens")) s.vocab = static_cast<int64_t>(g.find("tokenizer.ggml.tokens")->array.size());
  else if (embd && embd->dims.size() == 2) s.vocab = embd->dims[1];
  s.rms_norm_eps = g.get_f32(key("attention.layer_norm_rms_epsilon"));
  s.rope_theta = g.has(key("rope.freq_base")) ? g.get_f32(key("rope.freq_base")) : 10000.0;
  s.max_position_embeddings = g.get_u32(key("context_length"));
  std::string scaling = g.has(key("rope.scaling.type")) ? g.get_string(key("rope.scaling.type")) : "none";
  if (scaling == "linear") {
    s.rope_scaling.type = RopeScalingType::kLinear;
    s.rope_scaling.factor = g.get_f32(key("rope.scaling.factor"));
  } else {
    CONVEYOR_CHECK(scaling == "none", "GGUF file '", g.path(), "': rope scaling '", scaling, "' is not implemented");
  }
  CONVEYOR_CHECK(g.find_tensor("rope_freqs.weight") == nullptr, "GGUF file '", g.path(),
                 "' carries rope_freqs.weight (llama3 rope scaling baked into a tensor), which conveyor does not read "
                 "yet; use the HF checkpoint");
  if (g.has(key("attention.sliding_window"))) {
    int64_t w = g.get_u32(key("attention.sliding_window"));
    if (w > 0 && w < s.max_position_embeddings) s.sliding_window = w;
  }
  s.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  s.qkv_bias = s.architecture == Architecture::kQwen2;
  CONVEYOR_CHECK(s.qkv_bias || g.find_tensor("blk.0.attn_q.bias") == nullptr, "GGUF file '", g.path(),
                 "': attention bias on llama is not implemented");
  if (g.has("tokenizer.ggml.bos_token_id")) s.bos_token_id = g.get_u32("tokenizer.ggml.bos_token_id");
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (!g.has(k)) continue;
    int64_t id = g.get_u32(k);
    if (std::find(s.eos_token_ids.begin(), s.eos_token_ids.end(), id) == s.eos_token_ids.end())
      s.eos_token_ids.push_back(id);
  }
  validate(s);
  return s;
}

ModelSpec load_model_spec(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return model_spec_from_hf_dir(path);
  if (ends_with(path, ".gguf")) return model_spec_from_gguf(GgufFile(path));
  if (ends_with(path, ".yaml") || ends_with(path, ".yml")) return model_spec_from_yaml(path);
  if (ends_with(path, ".json")) return model_spec_from_config_json(read_json_file(path), path);
  CONVEYOR_CHECK(fs::exists(path), "model path '", path, "' does not exist");
  CONVEYOR_THROW("cannot tell the model format of '", path,
                 "': pass an HF directory, a .gguf file, a config.json or a configs/models/*.yaml preset");
}

int64_t ModelSpec::context_len(int64_t requested) const {
  if (requested <= 0) return max_position_embeddings;
  check_context(requested);
  return requested;
}

void ModelSpec::check_context(int64_t max_model_len) const {
  CONVEYOR_CHECK(max_model_len > 0, "max model length must be positive, found ", max_model_len);
  CONVEYOR_CHECK(max_model_len <= max_position_embeddings, source, ": max model length ", max_model_len,
                 " exceeds the model's max_position_embeddings ", max_position_embeddings, "; lower it");
}

int64_t ModelSpec::parameter_count() const {
  int64_t per_layer = hidden * (q_size() + 2 * kv_size()) + q_size() * hidden + 3 * hidden * intermediate + 2 * hidden;
  if (qkv_bias) per_layer += q_size() + 2 * kv_size();
  return vocab * hidden * (tie_word_embeddings ? 1 : 2) + layers * per_layer + hidden;
}

std::string ModelSpec::summary() const {
  std::ostringstream os;
  os << "architecture      " << architecture_name(architecture) << "\n"
     << "layers            " << layers << "\n"
     << "hidden            " << hidden << "\n"
     << "intermediate      " << intermediate << "\n"
     << "heads / kv heads  " << heads << " / " << kv_heads << " (head_dim " << head_dim << ")\n"
     << "vocab             " << vocab << "\n"
     << "rms_norm_eps      " << rms_norm_eps << "\n"
     << "rope_theta        " << rope_theta << "\n"
     << "rope scaling      " << rope_scaling_name(rope_scaling.type);
  if (rope_scaling.type != RopeScalingType::kNone) os << " (factor " << rope_scaling.factor << ")";
  os << "\nmax positions     " << max_position_embeddings << "\n"
     << "sliding window    " << (sliding_window ? std::to_string(*sliding_window) : std::string("none")) << "\n"
     << "tied embeddings   " << (tie_word_embeddings ? "yes" : "no") << "\n"
     << "qkv bias          " << (qkv_bias ? "yes" : "no") << "\n"
     << "bos / eos         " << (bos_token_id ? std::to_string(*bos_token_id) : std::string("-")) << " / ";
  std::vector<std::string> eos;
  for (int64_t e : eos_token_ids) eos.push_back(std::to_string(e));
  os << (eos.empty() ? "-" : join(eos, ",")) << "\n"
     << "dtype             " << (torch_dtype.empty() ? "-" : torch_dtype) << "\n"
     << "quantization      " << quant.describe() << "\n"
     << "parameters        " << parameter_count() << "\n";
  return os.str();
}

}  // namespace conveyor
