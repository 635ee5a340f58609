// ModelSpec: config.json (+ generation_config.json), YAML presets and GGUF metadata give the same
// shapes; rope scaling variants parse; every unimplemented feature is refused by name.
#include "runtime/model/spec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/model/gguf_file.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using json = nlohmann::json;
using testing::expect_error;

json llama_config() {
  return json::parse(R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
    "intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,
    "vocab_size":300,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":500000.0,
    "hidden_act":"silu","bos_token_id":1,"eos_token_id":[2,3],"torch_dtype":"bfloat16"})");
}

ModelSpec parse(const json& c) { return model_spec_from_config_json(c, "test/config.json"); }

TEST(ModelSpec, ReadsTheTinyLlamaDirectory) {
  ModelSpec s = load_model_spec(testing::data_path("formats/tiny_llama"));
  EXPECT_EQ(s.architecture, Architecture::kLlama);
  EXPECT_EQ(s.hidden, 32);
  EXPECT_EQ(s.intermediate, 64);
  EXPECT_EQ(s.layers, 4);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.kv_heads, 2);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_EQ(s.vocab, 101);
  EXPECT_DOUBLE_EQ(s.rms_norm_eps, 1e-5);
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_FALSE(s.qkv_bias);
  EXPECT_EQ(s.torch_dtype, "bfloat16");
  EXPECT_EQ(s.bos_token_id, 1);
  EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{2, 5}));  // generation_config.json overrides config.json
  EXPECT_DOUBLE_EQ(*s.generation.temperature, 0.6);
  EXPECT_DOUBLE_EQ(*s.generation.top_p, 0.9);
  EXPECT_TRUE(*s.generation.do_sample);
  EXPECT_FALSE(s.generation.top_k.has_value());
}

TEST(ModelSpec, ReadsQwen2WithBiasAndTiedEmbeddings) {
  ModelSpec s = load_model_spec(testing::data_path("formats/tiny_qwen2"));
  EXPECT_EQ(s.architecture, Architecture::kQwen2);
  EXPECT_TRUE(s.qkv_bias);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_FALSE(s.sliding_window.has_value());  // use_sliding_window: false
  EXPECT_EQ(s.torch_dtype, "float16");
}

TEST(ModelSpec, PresetsHaveTheKnownParameterCounts) {
  struct Want {
    const char* name;
    int64_t params;
  };
  for (Want w : {Want{"llama-3-8b", 8030261248}, {"llama-3-70b", 70553706496}, {"llama-2-7b", 6738415616},
                 {"qwen2-7b", 7615616512}, {"smollm2-135m", 134515008}}) {
    SCOPED_TRACE(w.name);
    ModelSpec s = load_model_spec(testing::source_dir() + "/configs/models/" + w.name + ".yaml");
    EXPECT_EQ(s.parameter_count(), w.params);
    EXPECT_EQ(s.head_dim, s.hidden / s.heads);
  }
  ModelSpec q = load_model_spec(testing::source_dir() + "/configs/models/qwen2-7b.yaml");
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_DOUBLE_EQ(q.rope_theta, 1e6);
}

TEST(ModelSpec, GgufMetadataMatchesThePreset) {
  std::string path = testing::test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  ModelSpec g = load_model_spec(path);
  ModelSpec y = load_model_spec(testing::source_dir() + "/configs/models/smollm2-135m.yaml");
  EXPECT_EQ(g.architecture, y.architecture);
  EXPECT_EQ(g.hidden, y.hidden);
  EXPECT_EQ(g.intermediate, y.intermediate);
  EXPECT_EQ(g.layers, y.layers);
  EXPECT_EQ(g.heads, y.heads);
  EXPECT_EQ(g.kv_heads, y.kv_heads);
  EXPECT_EQ(g.head_dim, y.head_dim);
  EXPECT_EQ(g.vocab, y.vocab);
  EXPECT_EQ(g.max_position_embeddings, y.max_position_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(g.rms_norm_eps), static_cast<float>(y.rms_norm_eps));
  EXPECT_DOUBLE_EQ(g.rope_theta, y.rope_theta);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(g.parameter_count(), y.parameter_count());
}

TEST(ModelSpec, GgufTinyMatchesItsHfTwin) {
  ModelSpec g = load_model_spec(testing::data_path("formats/tiny_llama.gguf"));
  ModelSpec h = load_model_spec(testing::data_path("formats/tiny_llama"));
  EXPECT_EQ(g.summary().substr(0, 200), h.summary().substr(0, 200));
  EXPECT_FALSE(g.tie_word_embeddings);  // output.weight present
}

TEST(ModelSpec, DefaultsAndExplicitHeadDim) {
  json c = llama_config();
  c.erase("num_key_value_heads");
  c.erase("rope_theta");
  c["head_dim"] = 16;  // q size 128 != hidden 64, as some models do
  ModelSpec s = parse(c);
  EXPECT_EQ(s.kv_heads, 8);
  EXPECT_EQ(s.head_dim, 16);
  EXPECT_EQ(s.q_size(), 128);
  EXPECT_DOUBLE_EQ(s.rope_theta, 10000.0);
  EXPECT_EQ(s.eos_token_ids, (std::vector<int64_t>{2, 3}));
  c["head_dim"] = nullptr;
  EXPECT_EQ(parse(c).head_dim, 8);
}

TEST(ModelSpec, RopeScalingVariants) {
  json c = llama_config();
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelSpec s = parse(c);
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(s.rope_scaling.factor, 8.0);
  EXPECT_EQ(s.rope_scaling.original_max_position_embeddings, 8192);
  c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(parse(c).rope_scaling.type, RopeScalingType::kLinear);
  c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}};
  EXPECT_EQ(parse(c).rope_scaling.type, RopeScalingType::kDynamic);
  c["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse(c).rope_scaling.type, RopeScalingType::kNone);
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error([&] { parse(c); }, "rope type 'yarn' is not implemented");
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_error([&] { parse(c); }, "'original_max_position_embeddings' is missing");
  c["rope_scaling"] = {{"rope_type", "linear"}};
  expect_error([&] { parse(c); }, "factor must be > 0");
}

TEST(ModelSpec, MistralSlidingWindowIsKept) {
  json c = llama_config();
  c["model_type"] = "mistral";
  c["max_position_embeddings"] = 32768;
  c["sliding_window"] = 4096;
  ModelSpec s = parse(c);
  EXPECT_EQ(s.architecture, Architecture::kMistral);
  ASSERT_TRUE(s.sliding_window.has_value());
  s.check_context(32768);  // the window is applied by attention, so any length up to the positions runs
  c["sliding_window"] = nullptr;  // Mistral 7B v0.2+: no window
  ModelSpec n = parse(c);
  EXPECT_FALSE(n.sliding_window.has_value());
  n.check_context(32768);
  expect_error([&] { n.check_context(32769); }, "exceeds the model's max_position_embeddings 32768");
  c["sliding_window"] = 32768;  // as long as the context: never slides
  EXPECT_FALSE(parse(c).sliding_window.has_value());
  c["model_type"] = "qwen2";
  c["use_sliding_window"] = true;
  c["sliding_window"] = 1024;
  EXPECT_EQ(parse(c).sliding_window, 1024);
}

TEST(ModelSpec, RefusesWhatItDoesNotImplement) {
  struct Case {
    const char* key;
    json value;
    const char* needle;
  };
  for (const Case& k : {Case{"model_type", "gemma", "model_type 'gemma' is not supported"},
                        Case{"model_type", "lama", "did you mean 'llama'"},
                        Case{"partial_rotary_factor", 0.5, "partial rotary"},
                        Case{"attention_bias", true, "attention_bias: true on llama"},
                        Case{"mlp_bias", true, "mlp_bias"},
                        Case{"hidden_act", "gelu", "hidden_act 'gelu'"},
                        Case{"quantization_config", json::object(), "quant_method ''"},
                        Case{"quantization_config", json{{"quant_method", "gptq"}}, "quant_method 'gptq'"},
                        Case{"num_key_value_heads", 3, "not a multiple of 3 KV heads"},
                        Case{"hidden_size", "64", "'hidden_size' must be an integer"},
                        Case{"eos_token_id", "x", "integer or a list"},
                        Case{"num_hidden_layers", 0, "layer count must be positive"}}) {
    SCOPED_TRACE(k.needle);
    json c = llama_config();
    c[k.key] = k.value;
    std::string msg = expect_error([&] { parse(c); }, k.needle);
    EXPECT_NE(msg.find("test/config.json"), std::string::npos) << msg;
  }
  json c = llama_config();
  c.erase("vocab_size");
  expect_error([&] { parse(c); }, "required key 'vocab_size' is missing");
  expect_error([&] { load_model_spec("/nonexistent/model.bin"); }, "does not exist");
  expect_error([&] { load_model_spec(testing::data_path("formats")); }, "has no config.json");
}

}  // namespace
}  // namespace conveyor
