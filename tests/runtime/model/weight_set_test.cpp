// Lazy weight sets: building a set reads no tensor data (only the up-front checks run), materialising
// one tensor reads exactly that tensor's elements, lazy tensors are bit-identical to eager reads
// (WeightLoader::load) for safetensors goldens and GGUF, dummy tensors equal an element-by-element
// reference of the full-tensor hash, a set keeps its source open after the loader is gone, and an
// unreadable tensor is refused when the loader is built, before any data is read.
#include "runtime/model/weight_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/model/weight_loader.h"
#include "runtime/model/weights_dummy.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::data_path;

// A source that counts what is read through it (read_range runs on OpenMP workers, hence the lock).
class CountingSource : public WeightSource {
 public:
  explicit CountingSource(std::shared_ptr<const WeightSource> inner, std::string unreadable = "")
      : inner_(std::move(inner)), unreadable_(std::move(unreadable)) {}
  SourceFormat format() const override { return inner_->format(); }
  const std::string& path() const override { return inner_->path(); }
  const std::vector<SourceTensor>& tensors() const override { return inner_->tensors(); }
  void read_range(const std::string& name, int64_t begin, int64_t end, float* out) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_[name] += end - begin;
    }
    inner_->read_range(name, begin, end, out);
  }
  void check_readable(const std::string& name) const override {
    ++checks_;
    CONVEYOR_CHECK(name != unreadable_, "test: tensor '", name, "' is unreadable");
    inner_->check_readable(name);
  }
  std::map<std::string, int64_t> read() const {
    std::lock_guard<std::mutex> lock(mu_);
    return read_;
  }
  int checks() const { return checks_; }

 private:
  std::shared_ptr<const WeightSource> inner_;
  std::string unreadable_;
  mutable std::mutex mu_;
  mutable std::map<std::string, int64_t> read_;
  mutable int checks_ = 0;
};

WeightShare share_of(const ModelSpec& spec, int stage, int pp, int rank, int tp) {
  WeightShare w;
  w.first_layer = spec.layers * stage / pp;
  w.last_layer = spec.layers * (stage + 1) / pp;
  w.embedding = stage == 0;
  w.final_norm = w.lm_head = stage == pp - 1;
  w.tp_rank = rank;
  w.tp_size = tp;
  return w;
}

void expect_same_tensor(const HostTensor& a, const HostTensor& b) {
  ASSERT_EQ(a.name, b.name);
  ASSERT_EQ(a.shape, b.shape) << a.name;
  ASSERT_EQ(a.full_shape, b.full_shape) << a.name;
  ASSERT_EQ(a.split_dim, b.split_dim) << a.name;
  ASSERT_EQ(a.split_begin, b.split_begin) << a.name;
  ASSERT_EQ(a.data.size(), static_cast<size_t>(a.numel())) << a.name;
  ASSERT_EQ(a.data.size(), b.data.size()) << a.name;
  for (size_t i = 0; i < a.data.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a.data[i], 4);
    std::memcpy(&y, &b.data[i], 4);
    ASSERT_EQ(x, y) << a.name << " element " << i << ": " << a.data[i] << " vs " << b.data[i];
  }
}

TEST(WeightSet, BuildingASetReadsNothingAndATakeReadsOnlyItsTensor) {
  for (const char* rel : {"formats/tiny_llama", "formats/tiny_llama.gguf"}) {
    SCOPED_TRACE(rel);
    const ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
    auto counting = std::make_shared<CountingSource>(open_weight_source(data_path(rel)));
    WeightLoader loader(spec, counting);
    EXPECT_EQ(counting->checks(), static_cast<int>(model_weights(spec).size()));  // every tensor checked up front
    const WeightShare w = share_of(spec, 0, 1, 1, 2);
    WeightSet set = loader.load_share(w);
    EXPECT_TRUE(counting->read().empty()) << "building the set read tensor data";
    size_t bytes = 0;
    for (const std::string& n : set.names()) {
      EXPECT_TRUE(set.header(n).data.empty()) << n;
      bytes += static_cast<size_t>(set.header(n).numel()) * sizeof(float);
    }
    EXPECT_EQ(set.bytes(), bytes);
    EXPECT_EQ(set.size(), share_weights(spec, w).size());
    const HostTensor q = set.materialize("layers.1.q_proj");
    const std::string src = loader.source_name({WeightKind::kQ, 1});
    EXPECT_EQ(counting->read(), (std::map<std::string, int64_t>{{src, q.numel()}}));
    EXPECT_TRUE(set.has("layers.1.q_proj"));  // materialize keeps the entry; the bank erases it
    set.erase("layers.1.q_proj");
    EXPECT_EQ(set.bytes(), bytes - q.data.size() * sizeof(float));
    testing::expect_error([&] { set.header("layers.1.q_proj"); }, "weight 'layers.1.q_proj' is not held by this rank");
  }
}

TEST(WeightSet, LazyTensorsAreBitIdenticalToEagerReads) {
  const std::vector<std::pair<std::string, std::string>> checkpoints = {
      {"goldens/llama3_rope", "goldens/llama3_rope"},   {"goldens/qwen2_tied_mqa", "goldens/qwen2_tied_mqa"},
      {"formats/tiny_qwen2", "formats/tiny_qwen2"},     {"formats/tiny_llama", "formats/tiny_llama.gguf"},
      {"formats/tiny_llama", "formats/tiny_llama_sharded"}};
  for (const auto& [config, weights] : checkpoints) {
    SCOPED_TRACE(weights);
    const ModelSpec spec = load_model_spec(data_path(config));
    const WeightLoader loader(spec, open_weight_source(data_path(weights)));
    const int tp = spec.heads % 2 == 0 ? 2 : 3;
    for (int stage = 0; stage < 2; ++stage)
      for (int rank = 0; rank < tp; ++rank) {
        const WeightShare w = share_of(spec, stage, 2, rank, tp);
        const WeightSet set = loader.load_share(w);
        for (const WeightId& id : share_weights(spec, w))
          expect_same_tensor(set.materialize(internal_name(id)), loader.load(id, w));
      }
  }
}

// The reference: each element of the share hashed at its flat index in the full tensor.
HostTensor dummy_reference(const ModelSpec& spec, const HostTensor& header, uint64_t seed) {
  HostTensor t = header;
  const bool tied = t.name == "lm_head" && spec.tie_word_embeddings;
  const uint64_t key = dummy_tensor_key(seed, tied ? "embed_tokens" : t.name);
  const bool norm = t.name == "final_norm" || t.name.find("_norm") != std::string::npos;
  const int64_t rows = t.shape[0], width = t.shape.size() == 2 ? t.shape[1] : 1;
  const int64_t cols = t.full_shape.size() == 2 ? t.full_shape[1] : 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const int64_t fr = t.split_dim == 0 ? t.split_begin + r : r, fc = t.split_dim == 1 ? t.split_begin + c : c;
      t.data.push_back((norm ? 1.0f : 0.0f) + kDummyStddev * dummy_normal(key, static_cast<uint64_t>(fr * cols + fc)));
    }
  return t;
}

TEST(WeightSet, DummyTensorsEqualTheFullTensorHashElementByElement) {
  for (const char* config : {"smollm2-135m.yaml", "qwen2-7b.yaml"}) {
    SCOPED_TRACE(config);
    ModelSpec spec = load_model_spec(testing::source_dir() + "/configs/models/" + config);
    spec.layers = 1;  // keep it fast: the per-layer shapes are the real ones but for qwen2-7b's MLP
    spec.vocab = 1003;
    spec.intermediate = std::min<int64_t>(spec.intermediate, 1536);
    const int tp = spec.heads % 3 == 0 ? 3 : 2;
    for (const WeightShare& w : {WeightShare::whole_model(spec), share_of(spec, 1, 2, tp - 1, tp)}) {
      SCOPED_TRACE(w.describe());
      const WeightSet set = make_dummy_weights(spec, w, 77);
      EXPECT_EQ(set.size(), share_weights(spec, w).size());
      for (const std::string& n : set.names())
        expect_same_tensor(set.materialize(n), dummy_reference(spec, set.header(n), 77));
    }
  }
  // A long 1-D share, filled in spans of rows by the threads, starting mid-tensor.
  HostTensor h;
  h.name = "layers.0.q_bias";
  h.full_shape = {300007};
  h.shape = {100003};
  h.split_dim = 0;
  h.split_begin = 123457;
  HostTensor got = h;
  got.data.resize(100003);
  fill_dummy(h, dummy_tensor_key(5, h.name), 0.0f, got.data.data());
  ModelSpec any;
  expect_same_tensor(got, dummy_reference(any, h, 5));
}

TEST(WeightSet, ASetKeepsItsSourceOpenAfterTheLoaderIsGone) {
  const std::string dir = data_path("formats/tiny_llama.gguf");
  const ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
  WeightSet set;
  {
    WeightLoader loader(spec, open_weight_source(dir));
    set = loader.load_share(WeightShare::whole_model(spec));
  }
  const WeightLoader fresh(spec, open_weight_source(dir));
  for (const WeightId& id : model_weights(spec))
    expect_same_tensor(set.materialize(internal_name(id)), fresh.load(id, WeightShare::whole_model(spec)));
}

TEST(WeightSet, AnUnreadableTensorIsRefusedBeforeAnyDataIsRead) {
  const ModelSpec spec = load_model_spec(data_path("formats/tiny_llama"));
  auto counting = std::make_shared<CountingSource>(open_weight_source(data_path("formats/tiny_llama")),
                                                   "model.layers.3.mlp.down_proj.weight");
  testing::expect_error([&] { WeightLoader l(spec, counting); },
                        "tensor 'model.layers.3.mlp.down_proj.weight' is unreadable");
  EXPECT_TRUE(counting->read().empty());
}

TEST(WeightSet, RefusesDataInAHeaderAndDuplicateNames) {
  WeightSet set;
  HostTensor h;
  h.name = "x";
  h.shape = h.full_shape = {2};
  auto fill = [](const HostTensor&, float* out) { out[0] = out[1] = 1.5f; };
  set.add(h, fill);
  testing::expect_error([&] { set.add(h, fill); }, "weight 'x' added twice");
  h.name = "y";
  h.data = {1.0f, 2.0f};
  testing::expect_error([&] { set.add(h, fill); }, "weight 'y' added to a lazy set with data");
  EXPECT_EQ(set.materialize("x").data, (std::vector<float>{1.5f, 1.5f}));
}

}  // namespace
}  // namespace conveyor
