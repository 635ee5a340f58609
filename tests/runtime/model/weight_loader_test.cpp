// WeightLoader and dummy weights: with pp=4 x tp=2 each of the 8 ranks holds exactly its tensors and
// bytes, the shards concatenate back to the full tensors, GGUF (Q/K permuted by llama.cpp) and HF
// give identical tensors, KV heads replicate when tp > kv heads, and dummy weights agree across
// layouts. Mismatched checkpoints are refused by tensor name.
#include "runtime/model/weight_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/model/gguf_dequant.h"
#include "runtime/model/gguf_file.h"
#include "runtime/model/safetensors_file.h"
#include "runtime/model/weights_dummy.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::data_path;
using testing::expect_error;
using Tensors = std::map<std::string, HostTensor>;  // a lazy set, materialised

// pp stages of the model's layers split evenly, tp ranks each.
std::vector<WeightShare> grid(const ModelSpec& spec, int pp, int tp) {
  std::vector<WeightShare> out;
  for (int s = 0; s < pp; ++s)
    for (int r = 0; r < tp; ++r) {
      WeightShare w;
      w.first_layer = spec.layers * s / pp;
      w.last_layer = spec.layers * (s + 1) / pp;
      w.embedding = s == 0;
      w.final_norm = w.lm_head = s == pp - 1;
      w.tp_rank = r;
      w.tp_size = tp;
      out.push_back(w);
    }
  return out;
}

// Rebuilds a full tensor from its TP shares (replicated shares of the same slice are skipped).
HostTensor concat(const std::vector<const HostTensor*>& parts) {
  HostTensor full = *parts[0];
  if (full.split_dim < 0) return full;
  full.shape = full.full_shape;
  full.data.assign(static_cast<size_t>(full.numel()), std::nanf(""));
  int64_t cols = full.full_shape.size() == 2 ? full.full_shape[1] : 1;
  for (const HostTensor* p : parts) {
    int64_t rows = p->shape[0], width = p->shape.size() == 2 ? p->shape[1] : 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        int64_t fr = p->split_dim == 0 ? p->split_begin + r : r, fc = p->split_dim == 1 ? p->split_begin + c : c;
        full.data[static_cast<size_t>(fr * cols + fc)] = p->data[static_cast<size_t>(r * width + c)];
      }
  }
  return full;
}

void expect_bitwise(const HostTensor& a, const HostTensor& b) {
  ASSERT_EQ(a.shape, b.shape) << a.name;
  ASSERT_EQ(a.data.size(), b.data.size()) << a.name;
  if (std::memcmp(a.data.data(), b.data.data(), a.data.size() * 4) == 0) return;
  for (size_t i = 0; i < a.data.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a.data[i], 4);
    std::memcpy(&y, &b.data[i], 4);
    ASSERT_EQ(x, y) << a.name << " element " << i << ": " << a.data[i] << " vs " << b.data[i];
  }
}

// Every tensor of the whole model is rebuilt exactly from the shares of a pp x tp grid.
void expect_grid_reassembles(const std::vector<Tensors>& shares, const Tensors& whole) {
  std::map<std::string, std::vector<const HostTensor*>> parts;
  for (const Tensors& s : shares)
    for (const auto& [name, t] : s) parts[name].push_back(&t);
  ASSERT_EQ(parts.size(), whole.size());
  for (const auto& [name, list] : parts) expect_bitwise(concat(list), whole.at(name));
}

TEST(WeightLoader, Pp4Tp2EachRankHoldsExactlyItsShare) {
  ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
  std::shared_ptr<const WeightSource> source = open_weight_source(data_path("formats/tiny_llama"));
  WeightLoader loader(spec, source);
  std::vector<WeightShare> layout = grid(spec, 4, 2);
  ASSERT_EQ(layout.size(), 8u);
  // Per layer and TP rank: 2 norms of 32, q 16x32, k/v 8x32, o 32x16, gate/up 32x32, down 32x32.
  const size_t layer_floats = 32 + 512 + 256 + 256 + 512 + 32 + 1024 + 1024 + 1024;
  const size_t vocab_rows[2] = {51, 50};  // ceil(101 / 2) and the shorter last shard
  std::vector<Tensors> held;
  for (const WeightShare& w : layout) {
    SCOPED_TRACE(w.describe());
    WeightSet lazy = loader.load_share(w);
    Tensors set = lazy.materialize_all();
    std::set<std::string> names;
    for (const auto& [n, t] : set) names.insert(n);
    std::set<std::string> want;
    for (const char* k : {"attn_norm", "q_proj", "k_proj", "v_proj", "o_proj", "mlp_norm", "gate_proj", "up_proj", "down_proj"})
      want.insert("layers." + std::to_string(w.first_layer) + "." + k);
    size_t floats = layer_floats;
    if (w.embedding) {
      want.insert("embed_tokens");
      floats += vocab_rows[w.tp_rank] * 32;
    }
    if (w.final_norm) {
      want.insert("final_norm");
      floats += 32;
    }
    if (w.lm_head) {
      want.insert("lm_head");
      floats += vocab_rows[w.tp_rank] * 32;
    }
    EXPECT_EQ(names, want);
    EXPECT_EQ(lazy.bytes(), floats * 4);
    if (w.embedding) {
      EXPECT_EQ(set.at("embed_tokens").split_begin, 51 * w.tp_rank);
    }
    held.push_back(std::move(set));
  }
  Tensors whole = loader.load_share(WeightShare::whole_model(spec)).materialize_all();
  expect_grid_reassembles(held, whole);
  // The whole model is the checkpoint itself, element for element.
  for (const WeightId& id : model_weights(spec)) {
    const HostTensor& t = whole.at(internal_name(id));
    std::vector<float> raw(t.data.size());
    source->read_range(hf_name(id), 0, static_cast<int64_t>(raw.size()), raw.data());
    ASSERT_EQ(0, std::memcmp(raw.data(), t.data.data(), raw.size() * 4)) << t.name;
  }
}

TEST(WeightLoader, GgufAndShardedGiveTheHfTensors) {
  ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
  WeightLoader a(spec, open_weight_source(data_path("formats/tiny_llama")));
  WeightLoader b(spec, open_weight_source(data_path("formats/tiny_llama_sharded")));
  WeightLoader c(spec, open_weight_source(data_path("formats/tiny_llama.gguf")));
  EXPECT_EQ(c.source_name({WeightKind::kQ, 2}), "blk.2.attn_q.weight");
  for (const WeightShare& w : grid(spec, 4, 2)) {
    Tensors x = a.load_share(w).materialize_all(), y = b.load_share(w).materialize_all();
    Tensors z = c.load_share(w).materialize_all();
    ASSERT_EQ(x.size(), z.size());
    for (const auto& [name, t] : x) {
      expect_bitwise(t, y.at(name));
      expect_bitwise(t, z.at(name));
    }
  }
}

TEST(WeightLoader, Qwen2BiasesSplitAndTiedHeadAndKvReplication) {
  ModelSpec spec = load_model_spec(data_path("formats/tiny_qwen2"));
  WeightLoader loader(spec, open_weight_source(data_path("formats/tiny_qwen2")));
  Tensors whole = loader.load_share(WeightShare::whole_model(spec)).materialize_all();
  expect_bitwise(whole.at("lm_head"), [&] { HostTensor e = whole.at("embed_tokens"); e.name = "lm_head"; return e; }());
  for (int tp : {2, 4}) {
    SCOPED_TRACE(tp);
    std::vector<Tensors> held;
    for (const WeightShare& w : grid(spec, 2, tp)) held.push_back(loader.load_share(w).materialize_all());
    expect_grid_reassembles(held, whole);
    for (size_t r = 0; r < static_cast<size_t>(tp); ++r) {
      const HostTensor& kb = held[r].at("layers.0.k_bias");
      const HostTensor& q = held[r].at("layers.0.q_proj");
      EXPECT_EQ(q.shape, (std::vector<int64_t>{32 / tp, 32}));
      // kv_heads = 2: tp 2 splits them; tp 4 gives each KV head to two ranks (rank/2).
      EXPECT_EQ(kb.shape, (std::vector<int64_t>{8}));
      EXPECT_EQ(kb.split_begin, tp == 2 ? 8 * static_cast<int64_t>(r) : 8 * static_cast<int64_t>(r / 2));
    }
    // Vocab 77: shards of ceil(77/tp) rows, the last one shorter.
    int64_t rows = (77 + tp - 1) / tp;
    EXPECT_EQ(held[static_cast<size_t>(tp)].at("lm_head").shape[0], rows);
    EXPECT_EQ(held.back().at("lm_head").shape[0], 77 - rows * (tp - 1));
  }
}

TEST(WeightLoader, RefusesCheckpointsThatDoNotMatchTheSpec) {
  ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
  std::shared_ptr<const WeightSource> source = open_weight_source(data_path("formats/tiny_llama"));
  ModelSpec wide = spec;
  wide.intermediate = 96;
  expect_error([&] { WeightLoader l(wide, source); }, "has shape [64, 32] but the model spec");
  ModelSpec shallow = spec;
  shallow.layers = 3;
  expect_error([&] { WeightLoader l(shallow, source); }, "holds tensor 'model.layers.3.");
  ModelSpec biased = spec;
  biased.qkv_bias = true;
  expect_error([&] { WeightLoader l(biased, source); }, "has no tensor 'model.layers.0.self_attn.q_proj.bias'");
  WeightLoader loader(spec, source);
  WeightShare w = WeightShare::whole_model(spec);
  w.tp_size = 3;
  expect_error([&] { loader.load_share(w); }, "does not divide the 4 attention heads");
  w.tp_size = 2;
  w.last_layer = 5;
  expect_error([&] { loader.load_share(w); }, "outside the model's 4 layers");
}

TEST(WeightLoader, DummyWeightsAgreeAcrossLayouts) {
  ModelSpec spec = load_model_spec(testing::source_dir() + "/configs/models/smollm2-135m.yaml");
  spec.layers = 4;  // keep the test fast; the shapes per layer are the real ones
  spec.vocab = 1003;
  Tensors whole = make_dummy_weights(spec, WeightShare::whole_model(spec), 1234).materialize_all();
  std::vector<Tensors> held;
  for (const WeightShare& w : grid(spec, 2, 3)) held.push_back(make_dummy_weights(spec, w, 1234).materialize_all());
  expect_grid_reassembles(held, whole);
  expect_bitwise(whole.at("lm_head"), [&] { HostTensor e = whole.at("embed_tokens"); e.name = "lm_head"; return e; }());
  const HostTensor& q = whole.at("layers.1.q_proj");
  double sum = 0, sq = 0;
  for (float v : q.data) sum += v, sq += double(v) * v;
  double mean = sum / q.data.size(), sd = std::sqrt(sq / q.data.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(sd, 0.02, 1e-3);
  for (float v : whole.at("layers.0.attn_norm").data) ASSERT_NEAR(v, 1.0f, 0.15f);
  Tensors other = make_dummy_weights(spec, WeightShare::whole_model(spec), 1235).materialize_all();
  EXPECT_NE(other.at("layers.1.q_proj").data, q.data);
  EXPECT_NE(whole.at("layers.2.q_proj").data, q.data);
}

TEST(WeightLoader, LoadsAShareOfTheRealSmolLM2) {
  std::string path = testing::test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  ModelSpec spec = load_model_spec(path);
  WeightLoader loader(spec, open_weight_source(path));
  WeightShare w;
  w.first_layer = 28;
  w.last_layer = 30;
  w.final_norm = w.lm_head = true;
  w.tp_rank = 2;
  w.tp_size = 3;
  WeightSet lazy = loader.load_share(w);
  Tensors set = lazy.materialize_all();
  EXPECT_EQ(set.size(), 2u * 9u + 2u);
  const HostTensor& head = set.at("lm_head");  // tied: rows [32768, 49152) of token_embd
  EXPECT_EQ(head.shape, (std::vector<int64_t>{16384, 576}));
  EXPECT_EQ(head.split_begin, 32768);
  // q_proj of layer 29, rank 2: HF rows [384, 576) = heads 6..8; GGUF row h*64 + 2i + j holds HF row
  // h*64 + 32j + i.
  GgufFile g(path);
  const GgufTensorInfo* info = g.find_tensor("blk.29.attn_q.weight");
  std::vector<float> raw(static_cast<size_t>(info->numel()));
  gguf_dequantize(info->type, g.tensor_data(*info), info->numel(), raw.data());
  const HostTensor& q = set.at("layers.29.q_proj");
  ASSERT_EQ(q.shape, (std::vector<int64_t>{192, 576}));
  for (int64_t r = 0; r < 192; ++r) {
    int64_t hf_row = 384 + r, h = hf_row / 64, j = (hf_row % 64) / 32, i = hf_row % 32;
    int64_t src = h * 64 + 2 * i + j;
    ASSERT_EQ(0, std::memcmp(&q.data[static_cast<size_t>(r * 576)], &raw[static_cast<size_t>(src * 576)], 576 * 4)) << r;
  }
  size_t bytes = 0;
  for (const auto& [n, t] : set) bytes += t.data.size() * 4;
  EXPECT_EQ(lazy.bytes(), bytes);
  EXPECT_LT(lazy.bytes(), 50u << 20);  // a share, not the ~540 MB fp32 model
}

}  // namespace
}  // namespace conveyor

namespace conveyor {
namespace {

// Writes a NaN at element `nan_at` and an Inf at `inf_at` of tensor `name` of a safetensors file.
void plant_non_finite(const std::string& file, const std::string& name, size_t nan_at, size_t inf_at) {
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  SafetensorsHeader h = parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), file);
  auto t = std::find_if(h.tensors.begin(), h.tensors.end(), [&](const SafetensorsTensor& x) { return x.name == name; });
  ASSERT_NE(t, h.tensors.end()) << name;
  size_t es = safetensors_dtype_size(t->dtype);
  uint32_t nan = 0x7fc00000u, inf = 0x7f800000u;  // f32 bits; bf16 is their top half
  if (t->dtype == SafetensorsDType::kBF16) nan >>= 16, inf >>= 16;
  if (t->dtype == SafetensorsDType::kF16) nan = 0x7e00u, inf = 0x7c00u;
  std::memcpy(&bytes[h.data_start + t->begin + nan_at * es], &nan, es);
  std::memcpy(&bytes[h.data_start + t->begin + inf_at * es], &inf, es);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

// NaN and Inf planted in one tensor of a copy of tiny_llama: reading it is refused naming the tensor,
// its file and the count; other tensors read; with the scan off the values come through as they are.
TEST(WeightLoader, RefusesNonFiniteTensorsUnlessTheScanIsOff) {
  std::string dir = testing::temp_dir("loader_nan");
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors"})
    std::filesystem::copy_file(data_path(std::string("formats/tiny_llama/") + f), dir + "/" + f);
  const std::string file = dir + "/model.safetensors";
  const std::string name = "model.layers.1.mlp.up_proj.weight";
  plant_non_finite(file, name, 5, 77);
  ModelSpec spec = load_model_spec(dir);
  WeightOrigin origin;
  origin.path = dir;
  WeightSet set = open_share(spec, WeightShare::whole_model(spec), origin);
  EXPECT_NO_THROW(set.materialize(internal_name({WeightKind::kUp, 0})));
  expect_error([&] { set.materialize(internal_name({WeightKind::kUp, 1})); },
               "tensor '" + name + "' in '" + file + "' has 2 non-finite value(s) (NaN or Inf)");
  origin.check_finite = false;
  WeightSet unchecked = open_share(spec, WeightShare::whole_model(spec), origin);
  HostTensor t = unchecked.materialize(internal_name({WeightKind::kUp, 1}));
  int64_t bad = 0;
  for (float v : t.data) bad += std::isfinite(v) ? 0 : 1;
  EXPECT_EQ(bad, 2);
}

}  // namespace
}  // namespace conveyor
