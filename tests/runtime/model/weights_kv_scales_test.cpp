// KV cache scales of a checkpoint (weights_kv_scales.h) over an in-memory WeightSource: every naming vLLM
// loads is found (llm-compressor's self_attn.k_scale, k_proj.output_scale, ModelOpt's k_proj.k_scale, the
// deprecated kv_scale for both), shapes [] and [1] and the float dtypes are taken, and a checkpoint with
// scales for only some layers, half a pair, a non-scalar scale or a kv_cache_scheme without scales is
// refused naming the tensor. The set entries read the value.
#include "runtime/model/weights_kv_scales.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

// Tensors by name, each read as its index + 0.5 (scales only; no other tensor is read here).
class FakeSource final : public WeightSource {
 public:
  explicit FakeSource(std::vector<SourceTensor> t) : tensors_(std::move(t)) {
    std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  }
  SourceFormat format() const override { return SourceFormat::kSafetensors; }
  const std::string& path() const override { return path_; }
  const std::vector<SourceTensor>& tensors() const override { return tensors_; }
  void read_range(const std::string& name, int64_t begin, int64_t end, float* out) const override {
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].name == name)
        for (int64_t j = begin; j < end; ++j) out[j - begin] = static_cast<float>(i) + 0.5f;
  }

 private:
  std::vector<SourceTensor> tensors_;
  std::string path_ = "fake";
};

ModelSpec two_layers() { return load_model_spec(testing::data_path("fp8/ct_channel")); }

SourceTensor scalar(const std::string& name, std::vector<int64_t> shape = {1}, const std::string& dtype = "F32") {
  SourceTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.file = "fake.safetensors";
  return t;
}

std::string attn(int l) { return "model.layers." + std::to_string(l) + ".self_attn."; }

TEST(KvScales, EveryNamingVllmLoadsIsFound) {
  const ModelSpec spec = two_layers();
  const std::vector<std::pair<std::string, std::string>> schemes = {
      {"k_scale", "v_scale"}, {"k_proj.output_scale", "v_proj.output_scale"}, {"k_proj.k_scale", "v_proj.v_scale"}};
  for (const auto& [k, v] : schemes) {
    std::vector<SourceTensor> t;
    for (int l = 0; l < 2; ++l) {
      t.push_back(scalar(attn(l) + k, l == 0 ? std::vector<int64_t>{1} : std::vector<int64_t>{}, "BF16"));
      t.push_back(scalar(attn(l) + v));
    }
    FakeSource src(t);
    const std::vector<KvScaleNames> names = find_kv_scales(spec, src);
    ASSERT_EQ(names.size(), 2u) << k;
    EXPECT_EQ(names[1].k, attn(1) + k);
    EXPECT_EQ(names[1].v, attn(1) + v);
    EXPECT_TRUE(is_kv_scale_name(attn(1) + k));
    EXPECT_TRUE(is_kv_scale_name(attn(0) + v));
  }
  FakeSource legacy({scalar(attn(0) + "kv_scale"), scalar(attn(1) + "kv_scale")});
  const std::vector<KvScaleNames> names = find_kv_scales(spec, legacy);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].k, names[0].v);  // one scale for both
  EXPECT_FALSE(is_kv_scale_name(attn(0) + "q_proj.weight_scale"));
  EXPECT_FALSE(is_kv_scale_name(attn(0) + "k_proj.weight_scale"));
  EXPECT_FALSE(is_kv_scale_name("lm_head.k_scale"));
}

TEST(KvScales, NoneIsNoneUnlessTheConfigPromisesThem) {
  ModelSpec spec = two_layers();
  FakeSource empty({});
  EXPECT_TRUE(find_kv_scales(spec, empty).empty());
  spec.quant.kv_cache_scales = true;
  testing::expect_error([&] { find_kv_scales(spec, empty); }, "kv_cache_scheme");
}

TEST(KvScales, PartialOrMalformedScalesAreRefusedByName) {
  const ModelSpec spec = two_layers();
  FakeSource one_layer({scalar(attn(0) + "k_scale"), scalar(attn(0) + "v_scale")});
  testing::expect_error([&] { find_kv_scales(spec, one_layer); }, "for 1 of 2 layers but none for layer 1");
  FakeSource half({scalar(attn(0) + "k_scale"), scalar(attn(1) + "k_scale"), scalar(attn(1) + "v_scale")});
  testing::expect_error([&] { find_kv_scales(spec, half); }, "'model.layers.0.self_attn.v_scale'");
  FakeSource per_head({scalar(attn(0) + "k_scale", {2}), scalar(attn(0) + "v_scale"), scalar(attn(1) + "k_scale"),
                       scalar(attn(1) + "v_scale")});
  testing::expect_error([&] { find_kv_scales(spec, per_head); }, "must hold one value");
  FakeSource int_scale({scalar(attn(0) + "k_scale", {1}, "I32"), scalar(attn(0) + "v_scale"),
                        scalar(attn(1) + "k_scale"), scalar(attn(1) + "v_scale")});
  testing::expect_error([&] { find_kv_scales(spec, int_scale); }, "is I32");
}

TEST(KvScales, EntriesReadTheShareOfLayers) {
  const ModelSpec spec = two_layers();
  auto src = std::make_shared<FakeSource>(std::vector<SourceTensor>{
      scalar(attn(0) + "k_scale"), scalar(attn(0) + "v_scale"), scalar(attn(1) + "k_scale"), scalar(attn(1) + "v_scale")});
  const std::vector<KvScaleNames> names = find_kv_scales(spec, *src);
  WeightShare share;
  share.first_layer = 1;
  share.last_layer = 2;
  WeightSet set;
  add_kv_scale_entries(set, names, share, src);
  EXPECT_EQ(set.names(), (std::vector<std::string>{"layers.1.k_scale", "layers.1.v_scale"}));
  // Sorted names: 0.k, 0.v, 1.k, 1.v -> layer 1's k is tensor 2.
  EXPECT_EQ(set.materialize("layers.1.k_scale").data, std::vector<float>{2.5f});
  EXPECT_EQ(set.materialize("layers.1.v_scale").data, std::vector<float>{3.5f});
  EXPECT_EQ(kv_scale_entry(7, KvScaleKind::kV), "layers.7.v_scale");
}

}  // namespace
}  // namespace conveyor
