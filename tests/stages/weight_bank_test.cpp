// WeightBank over a lazy set: a tensor is read only when taken, exactly once, and its buffer is
// handed to the backend (the CPU backend adopts it without a copy, so no host copy stays behind);
// take_concat_rows stacks N weights (q|k|v) or N 1-D biases into one tensor equal to the parts read
// separately; a bad concatenation or name is refused naming the weights and leaves the bank as it was.
#include "stages/weight_bank.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>

#include "kernels/cpu/fp8.h"
#include "runtime/model/weights_dummy.h"
#include "stages/cpu_ops.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::expect_error;

std::vector<float> download(Ops& ops, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.view().numel()));
  ops.download(t.view(), host.data());
  return host;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &got[i], 4);
    std::memcpy(&y, &want[i], 4);
    ASSERT_EQ(x, y) << what << " element " << i;
  }
}

// Qwen2 shapes (QKV biases, 28 heads over 4 KV heads), small enough for a test; tp rank 1 of 2.
struct Qwen2Share {
  ModelSpec spec;
  WeightShare share;
  Qwen2Share() {
    spec = load_model_spec(testing::source_dir() + "/configs/models/qwen2-7b.yaml");
    spec.layers = 2;
    spec.vocab = 1003;
    spec.hidden = 448;
    spec.head_dim = 16;
    spec.intermediate = 512;
    share = WeightShare::whole_model(spec);
    share.tp_rank = 1;
    share.tp_size = 2;
  }
};

TEST(WeightBank, TakeConcatRowsStacksThreeWeightsAndThreeBiases) {
  Qwen2Share q;
  auto ops = make_cpu_ops();
  const std::map<std::string, HostTensor> ref = make_dummy_weights(q.spec, q.share, 9).materialize_all();
  WeightBank bank(make_dummy_weights(q.spec, q.share, 9), *ops);
  for (const char* suffix : {"_proj", "_bias"}) {
    SCOPED_TRACE(suffix);
    std::vector<std::string> names;
    std::vector<float> want;
    int64_t rows = 0;
    for (const char* p : {"q", "k", "v"}) {
      names.push_back(std::string("layers.1.") + p + suffix);
      const HostTensor& part = ref.at(names.back());
      want.insert(want.end(), part.data.begin(), part.data.end());
      rows += part.shape[0];
    }
    Tensor t = bank.take_concat_rows(names);
    if (std::string(suffix) == "_proj") {
      EXPECT_EQ(t.rows(), rows);  // 14 + 2 + 2 heads of this rank
      EXPECT_EQ(t.rows(), (448 / 2) + 2 * 32);
      EXPECT_EQ(t.cols(), 448);
    } else {
      EXPECT_EQ(t.view().numel(), rows);  // 1-D: one vector of q|k|v biases
    }
    expect_bits(download(*ops, t), want, names[0]);
    for (const std::string& n : names) EXPECT_FALSE(bank.has(n)) << n;
  }
  // The two-name overload: gate|up.
  Tensor gu = bank.take_concat_rows("layers.0.gate_proj", "layers.0.up_proj");
  std::vector<float> want = ref.at("layers.0.gate_proj").data;
  want.insert(want.end(), ref.at("layers.0.up_proj").data.begin(), ref.at("layers.0.up_proj").data.end());
  EXPECT_EQ(gu.rows(), 2 * 256);
  expect_bits(download(*ops, gu), want, "gate|up");
}

TEST(WeightBank, RefusesBadConcatenationsAndNamesAndLeavesTheBankAsItWas) {
  Qwen2Share q;
  auto ops = make_cpu_ops();
  WeightBank bank(make_dummy_weights(q.spec, q.share, 9), *ops);
  const size_t pending = bank.pending_bytes();
  expect_error([&] { bank.take_concat_rows({"layers.0.q_proj", "layers.0.q_bias"}); }, "cannot be stacked");
  // o_proj's share is [448, 224], q_proj's [224, 448]: columns differ.
  expect_error([&] { bank.take_concat_rows({"layers.0.q_proj", "layers.0.k_proj", "layers.0.o_proj"}); },
               "layers.0.o_proj [448, 224] cannot be stacked");
  expect_error([&] { bank.take_concat_rows({"layers.0.q_proj", "layers.0.nope"}); },
               "weight 'layers.0.nope' is not among the");
  expect_error([&] { bank.take_concat_rows({"layers.0.k_bias", "layers.0.k_bias"}); }, "names a weight twice");
  EXPECT_EQ(bank.pending_bytes(), pending);
  for (const char* n : {"layers.0.q_proj", "layers.0.k_proj", "layers.0.o_proj", "layers.0.q_bias", "layers.0.k_bias"})
    EXPECT_TRUE(bank.has(n)) << n;
  bank.take("layers.0.q_proj");
  expect_error([&] { bank.take("layers.0.q_proj"); }, "weight 'layers.0.q_proj' is not among the");
  expect_error([&] { bank.peek("layers.0.q_proj"); }, "(already taken, or not in its share)");
  expect_error([&] { bank.finish(); }, "not used by any layer: embed_tokens, final_norm, layers.0.attn_norm");
}

TEST(WeightBank, ReadsEachTensorOnlyWhenTakenAndHandsItsBufferOver) {
  std::map<std::string, int> calls;
  std::map<std::string, const float*> buffers;
  WeightSet set;
  const std::map<std::string, std::vector<int64_t>> shapes = {{"a", {3, 5}}, {"b", {4, 5}}, {"c", {7}}};
  for (const auto& [name, shape] : shapes) {
    HostTensor h;
    h.name = name;
    h.shape = h.full_shape = shape;
    set.add(h, [&calls, &buffers](const HostTensor& t, float* out) {
      ++calls[t.name];
      buffers[t.name] = out;
      const std::vector<float> v = testing::random_floats(static_cast<size_t>(t.numel()), t.name[0]);
      std::copy(v.begin(), v.end(), out);
    });
  }
  auto ops = make_cpu_ops();
  WeightBank bank(std::move(set), *ops);
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(bank.peek("a").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(bank.peek("a").data.empty());
  EXPECT_EQ(bank.pending_bytes(), (15u + 20u + 7u) * 4u);
  Tensor c = bank.take("c");
  EXPECT_EQ(calls, (std::map<std::string, int>{{"c", 1}}));
  EXPECT_EQ(c.view().data, buffers["c"]);  // the filled buffer itself became the weight: no second copy
  expect_bits(download(*ops, c), testing::random_floats(7, 'c'), "c");
  EXPECT_EQ(bank.pending_bytes(), (15u + 20u) * 4u);
  expect_error([&] { bank.finish(); }, "not used by any layer: a, b");
  Tensor ab = bank.take_concat_rows({"a", "b"});
  EXPECT_EQ(calls, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}}));
  // Both parts were read straight into the one concatenated buffer, b right after a.
  EXPECT_EQ(ab.view().data, buffers["a"]);
  EXPECT_EQ(buffers["b"], buffers["a"] + 15);
  std::vector<float> want = testing::random_floats(15, 'a');
  const std::vector<float> b = testing::random_floats(20, 'b');
  want.insert(want.end(), b.begin(), b.end());
  expect_bits(download(*ops, ab), want, "a|b");
  EXPECT_EQ(bank.pending_bytes(), 0u);
  bank.finish();
}

// With FP8 linears a stack becomes one FP8 weight: per output row, the codes and scale that
// quantize_rows_fp8_ref gives the stacked fp32 values (read one stack at a time, never the share);
// non-linear weights are untouched, and the device bytes count one byte per code plus a row scale.
TEST(WeightBank, TakeLinearQuantizesEachStackPerOutputChannel) {
  Qwen2Share q;
  auto ops = make_cpu_ops();
  const std::map<std::string, HostTensor> ref = make_dummy_weights(q.spec, q.share, 5).materialize_all();
  WeightSet set = make_dummy_weights(q.spec, q.share, 5);
  const size_t bytes = device_weight_bytes(set, true, 2);
  WeightBank bank(std::move(set), *ops, /*fp8_linears=*/true);
  const Tensor gate_up = bank.take_linear({"layers.0.gate_proj", "layers.0.up_proj"});
  ASSERT_TRUE(gate_up.view().fp8());
  std::vector<float> stacked = ref.at("layers.0.gate_proj").data;
  const std::vector<float>& up = ref.at("layers.0.up_proj").data;
  stacked.insert(stacked.end(), up.begin(), up.end());
  const int64_t rows = gate_up.rows(), cols = gate_up.cols();
  std::vector<uint8_t> codes(stacked.size());
  std::vector<float> scales(static_cast<size_t>(rows)), values(stacked.size());
  quantize_rows_fp8_ref(codes.data(), scales.data(), stacked.data(), rows, cols);
  dequantize_rows_fp8_ref(values.data(), codes.data(), nullptr, rows, cols);
  expect_bits(download(*ops, gate_up), values, "gate|up codes");
  expect_bits(std::vector<float>(gate_up.view().scales, gate_up.view().scales + rows), scales, "gate|up scales");
  expect_bits(download(*ops, bank.take("layers.0.mlp_norm")), ref.at("layers.0.mlp_norm").data, "norm");
  size_t want = 0;
  for (const auto& [name, t] : ref) {
    const bool linear = name.find("_proj") != std::string::npos;
    want += linear ? static_cast<size_t>(t.numel()) + static_cast<size_t>(t.shape[0]) * 4 : t.data.size() * 2;
  }
  EXPECT_EQ(bytes, want);
}

}  // namespace
}  // namespace conveyor
