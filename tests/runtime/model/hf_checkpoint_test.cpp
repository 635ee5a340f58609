// Checkpoints written by HF transformers 5 (tests/data/goldens/*: save_pretrained, config.json with
// `rope_parameters`; tests/data/formats/llama_dynamic_sharded_bf16: the same writer, sharded, bf16, by
// scripts/make_sharded_golden.py). ModelSpec must agree with the config's own values; WeightLoader must
// give the file's tensors exactly (checked against a small safetensors reader here, independent of
// ours), whole and as pp=2 x tp shares whose sizes follow the Megatron split and which reassemble.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "runtime/model/weight_loader.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using nlohmann::json;
using testing::data_path;

const char* const kGoldens[] = {"llama3_rope", "llama_dynamic", "llama_hd128", "mistral_swa", "qwen2_tied_mqa"};

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return json::parse(in);
}

// The F32 / BF16 tensors of one .safetensors file, as fp32, by name: the plain format, read directly.
std::map<std::string, std::vector<float>> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::vector<float>> out;
  const json parsed = json::parse(header);
  for (const auto& [name, info] : parsed.items()) {
    if (name == "__metadata__") continue;
    const auto offs = info.at("data_offsets").get<std::vector<size_t>>();
    const std::string dtype = info.at("dtype").get<std::string>();
    std::vector<float>& v = out[name];
    if (dtype == "F32") {
      v.resize((offs[1] - offs[0]) / 4);
      std::memcpy(v.data(), data.data() + offs[0], v.size() * 4);
    } else {
      EXPECT_EQ(dtype, "BF16") << name;
      for (size_t o = offs[0]; o < offs[1]; o += 2) {
        uint32_t bits = 0;
        std::memcpy(reinterpret_cast<char*>(&bits) + 2, data.data() + o, 2);  // little endian: high half
        float f;
        std::memcpy(&f, &bits, 4);
        v.push_back(f);
      }
    }
  }
  return out;
}

// fp32 -> bf16 -> fp32, round to nearest even (what torch's .to(torch.bfloat16) does; no NaN here).
float round_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(HfCheckpoint, ModelSpecAgreesWithEachTransformersConfig) {
  for (const char* name : kGoldens) {
    SCOPED_TRACE(name);
    const std::string dir = data_path(std::string("goldens/") + name);
    const json c = read_json(dir + "/config.json");
    const json gen = read_json(dir + "/generation_config.json");
    const json& rope = c.at("rope_parameters");
    const ModelSpec s = model_spec_from_hf_dir(dir);
    EXPECT_EQ(architecture_name(s.architecture), c.at("model_type").get<std::string>());
    EXPECT_EQ(s.hidden, c.at("hidden_size").get<int64_t>());
    EXPECT_EQ(s.intermediate, c.at("intermediate_size").get<int64_t>());
    EXPECT_EQ(s.layers, c.at("num_hidden_layers").get<int64_t>());
    EXPECT_EQ(s.heads, c.at("num_attention_heads").get<int64_t>());
    EXPECT_EQ(s.kv_heads, c.at("num_key_value_heads").get<int64_t>());
    EXPECT_EQ(s.head_dim, c.value("head_dim", s.hidden / s.heads));
    EXPECT_EQ(s.vocab, c.at("vocab_size").get<int64_t>());
    EXPECT_EQ(s.max_position_embeddings, c.at("max_position_embeddings").get<int64_t>());
    EXPECT_EQ(s.rms_norm_eps, c.at("rms_norm_eps").get<double>());
    EXPECT_EQ(s.tie_word_embeddings, c.at("tie_word_embeddings").get<bool>());
    EXPECT_EQ(s.qkv_bias, s.architecture == Architecture::kQwen2);
    EXPECT_EQ(s.torch_dtype, "float32");
    EXPECT_EQ(s.bos_token_id, std::optional<int64_t>(gen.at("bos_token_id").get<int64_t>()));
    EXPECT_EQ(s.eos_token_ids, std::vector<int64_t>{gen.at("eos_token_id").get<int64_t>()});
    // rope_parameters: theta and scaling as the config intends ("default" is no scaling).
    EXPECT_EQ(s.rope_theta, rope.at("rope_theta").get<double>());
    const std::string type = rope.at("rope_type").get<std::string>();
    EXPECT_EQ(rope_scaling_name(s.rope_scaling.type), type == "default" ? std::string("none") : type);
    if (type != "default") {
      EXPECT_EQ(s.rope_scaling.factor, rope.at("factor").get<double>());
    }
    if (type == "llama3") {
      EXPECT_EQ(s.rope_scaling.low_freq_factor, rope.at("low_freq_factor").get<double>());
      EXPECT_EQ(s.rope_scaling.high_freq_factor, rope.at("high_freq_factor").get<double>());
      EXPECT_EQ(s.rope_scaling.original_max_position_embeddings,
                rope.at("original_max_position_embeddings").get<int64_t>());
    }
    // Only mistral_swa has a window shorter than its context; the spec carries it (attention applies it).
    if (c.contains("sliding_window") && c["sliding_window"].is_number_integer()) {
      const int64_t w = c["sliding_window"].get<int64_t>();
      EXPECT_EQ(s.sliding_window, std::optional<int64_t>(w));
      s.check_context(w);
      s.check_context(s.max_position_embeddings);
    } else {
      EXPECT_FALSE(s.sliding_window.has_value());
    }
  }
}

TEST(HfCheckpoint, RopeParametersThatCannotRunAreRefused) {
  json c = read_json(data_path("goldens/llama3_rope/config.json"));
  c["rope_parameters"]["rope_type"] = "yarn";
  testing::expect_error([&] { model_spec_from_config_json(c, "cfg"); }, "rope type 'yarn' is not implemented");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}};
  testing::expect_error([&] { model_spec_from_config_json(c, "cfg"); }, "partial rotary");
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
  testing::expect_error([&] { model_spec_from_config_json(c, "cfg"); }, "per-layer-type");
  c["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 2.0}};
  c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  testing::expect_error([&] { model_spec_from_config_json(c, "cfg"); }, "disagree");
}

// The rows / columns one TP rank holds of a weight, by the Megatron split of weights_layout.h.
std::vector<int64_t> expected_share_shape(const ModelSpec& spec, const WeightId& id, int tp, int rank) {
  std::vector<int64_t> shape = full_shape(spec, id);
  const int64_t kv_rows = spec.kv_heads >= tp ? shape[0] / tp : spec.head_dim;  // replicated heads
  switch (id.kind) {
    case WeightKind::kQ: case WeightKind::kQBias: case WeightKind::kGate: case WeightKind::kUp:
      shape[0] /= tp;
      break;
    case WeightKind::kK: case WeightKind::kV: case WeightKind::kKBias: case WeightKind::kVBias:
      shape[0] = kv_rows;
      break;
    case WeightKind::kO: case WeightKind::kDown:
      shape[1] /= tp;
      break;
    case WeightKind::kEmbedding: case WeightKind::kLmHead: {
      const int64_t per = (spec.vocab + tp - 1) / tp;
      shape[0] = std::min(per, spec.vocab - per * rank);
      break;
    }
    default:
      break;
  }
  return shape;
}

// Loads the whole model and a pp=2 x tp grid; the whole model must be `want` (by checkpoint name),
// each share exactly its tensors and bytes, and the shares must reassemble into the whole.
void check_loads(const std::string& dir, int tp, const std::map<std::string, std::vector<float>>& want) {
  const ModelSpec spec = model_spec_from_hf_dir(dir);
  const WeightLoader loader(spec, open_weight_source(dir));
  const std::map<std::string, HostTensor> whole = loader.load_share(WeightShare::whole_model(spec)).materialize_all();
  ASSERT_EQ(whole.size(), model_weights(spec).size());
  for (const WeightId& id : model_weights(spec)) {
    const std::string src = loader.source_name(id);
    ASSERT_TRUE(want.count(src)) << src;
    expect_same_bits(whole.at(internal_name(id)).data, want.at(src), internal_name(id));
  }
  std::map<std::string, std::vector<float>> rebuilt;
  for (int stage = 0; stage < 2; ++stage) {
    for (int rank = 0; rank < tp; ++rank) {
      WeightShare w;
      w.first_layer = spec.layers * stage / 2;
      w.last_layer = spec.layers * (stage + 1) / 2;
      w.embedding = stage == 0;
      w.final_norm = w.lm_head = stage == 1;
      w.tp_rank = rank;
      w.tp_size = tp;
      SCOPED_TRACE(w.describe());
      const WeightSet lazy = loader.load_share(w);
      const std::map<std::string, HostTensor> set = lazy.materialize_all();
      std::map<std::string, std::vector<int64_t>> want_shapes;
      size_t floats = 0;
      for (const WeightId& id : share_weights(spec, w)) {
        const auto shape = expected_share_shape(spec, id, tp, rank);
        want_shapes[internal_name(id)] = shape;
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        floats += static_cast<size_t>(n);
      }
      ASSERT_EQ(set.size(), want_shapes.size());
      for (const auto& [n, t] : set) {
        ASSERT_TRUE(want_shapes.count(n)) << "unexpected tensor " << n;
        EXPECT_EQ(t.shape, want_shapes.at(n)) << n;
        // Scatter into the full tensor; replicated KV shares write identical values twice.
        std::vector<float>& full = rebuilt[n];
        int64_t full_n = 1;
        for (int64_t d : t.full_shape) full_n *= d;
        full.resize(static_cast<size_t>(full_n));
        const int64_t rows = t.shape[0], width = t.shape.size() == 2 ? t.shape[1] : 1;
        const int64_t cols = t.full_shape.size() == 2 ? t.full_shape[1] : 1;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t col = 0; col < width; ++col) {
            const int64_t fr = t.split_dim == 0 ? t.split_begin + r : r;
            const int64_t fc = t.split_dim == 1 ? t.split_begin + col : col;
            full[static_cast<size_t>(fr * cols + fc)] = t.data[static_cast<size_t>(r * width + col)];
          }
      }
      EXPECT_EQ(lazy.bytes(), floats * sizeof(float));
    }
  }
  ASSERT_EQ(rebuilt.size(), whole.size());
  for (const auto& [n, t] : whole) expect_same_bits(rebuilt.at(n), t.data, "reassembled " + n);
}

TEST(HfCheckpoint, WeightLoaderLoadsEachGoldenWholeAndAsPp2TpShares) {
  for (const char* name : kGoldens) {
    SCOPED_TRACE(name);
    const std::string dir = data_path(std::string("goldens/") + name);
    const ModelSpec spec = model_spec_from_hf_dir(dir);
    // qwen2_tied_mqa has 3 heads: tp=2 is refused (by name), tp=3 splits it with its one KV head copied.
    int tp = 2;
    if (spec.heads % 2 != 0) {
      testing::expect_error([&] { check_tensor_parallel(spec, 2); }, "3");
      tp = 3;
    }
    check_loads(dir, tp, read_safetensors(dir + "/model.safetensors"));
  }
}

// The sharded bf16 re-save: index and three shards as transformers writes them; every tensor is the
// fp32 golden rounded to bf16, through the loader, whole and in shares.
TEST(HfCheckpoint, ShardedBf16CopyGivesTheGoldenRoundedToBf16) {
  const std::string dir = data_path("formats/llama_dynamic_sharded_bf16");
  const ModelSpec spec = model_spec_from_hf_dir(dir);
  EXPECT_EQ(spec.torch_dtype, "bfloat16");
  EXPECT_EQ(spec.rope_scaling.type, RopeScalingType::kDynamic);
  const auto source = open_weight_source(dir);
  std::set<std::string> files;
  for (const SourceTensor& t : source->tensors()) {
    EXPECT_EQ(t.dtype, "BF16") << t.name;
    files.insert(t.file);
  }
  EXPECT_EQ(files.size(), 3u);
  std::map<std::string, std::vector<float>> want;
  for (const auto& [name, v] : read_safetensors(data_path("goldens/llama_dynamic/model.safetensors"))) {
    for (float x : v) want[name].push_back(round_to_bf16(x));
  }
  // The shards themselves, read independently, hold the same values.
  std::map<std::string, std::vector<float>> from_shards;
  for (const std::string& f : files) {
    for (auto& [name, v] : read_safetensors(f)) from_shards[name] = std::move(v);
  }
  ASSERT_EQ(from_shards.size(), want.size());
  for (const auto& [name, v] : want) expect_same_bits(from_shards.at(name), v, "shard tensor " + name);
  check_loads(dir, 2, want);
}

}  // namespace
}  // namespace conveyor
