// FP8 on the CPU backend against HF transformers (scripts/make_fp8_checkpoints.py writes the tiny
// checkpoints and HF's greedy ids): compressed-tensors per-channel/dynamic and per-tensor/static
// checkpoints, `--quantization fp8` on the dequantized twin (which must re-derive the per-channel
// checkpoint's codes and so its ids), and the fp8 block layout (HF dequantizes it to bf16, so only
// the first token is compared). Tiny random models are chaotic under activation quantization (a
// scale of amax * (1/448) instead of amax / 448 already leaves HF's ids on about a third of the
// prompts), so the bar is at least half of the 12 prompts identical for 24 tokens; real defects
// (no activation quantization, per-tensor scales, e5m2) leave them on every prompt.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/model/spec.h"
#include "stages/cpu_model_runner.h"
#include "stages/stage_options.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using json = nlohmann::json;
using Ids = std::vector<std::vector<int32_t>>;

const json& reference() {
  static const json ref = [] {
    std::ifstream in(testing::data_path("fp8/reference.json"));
    return json::parse(in);
  }();
  return ref;
}

Ids prompts() { return reference()["prompts"].get<Ids>(); }
Ids hf_ids(const std::string& layout) { return reference()["generated"][layout].get<Ids>(); }

Ids generate(const std::string& layout, const std::string& quantization, bool dummy = false) {
  const std::string dir = testing::data_path("fp8/" + layout);
  Config cfg = testing::runner_config(dir, 64);
  cfg.set("model.quantization", quantization, "test");
  if (dummy) cfg.set("model.load_format", "dummy", "test");
  auto runner = make_cpu_model_runner(StageOptions::from_config(cfg), load_model_spec(dir));
  testing::Driver d(*runner);
  Ids out;
  for (const testing::GreedyRun& r : testing::greedy_alone(d, prompts(), reference()["new_tokens"].get<int>()))
    out.push_back(r.tokens);
  return out;
}

// Prompts whose 24 generated ids all equal HF's; printed, as the acceptance asks for the count.
int identical(const Ids& got, const Ids& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size());
  int same = 0;
  for (size_t p = 0; p < got.size() && p < want.size(); ++p) same += got[p] == want[p];
  std::cout << what << ": " << same << " of " << want.size() << " prompts identical to HF for "
            << reference()["new_tokens"].get<int>() << " tokens\n";
  return same;
}

TEST(Fp8Checkpoints, DequantizedTwinInFp32EqualsHfExactly) {
  EXPECT_EQ(identical(generate("twin_fp32", "none"), hf_ids("twin_fp32"), "twin fp32"), 12);
}

TEST(Fp8Checkpoints, CompressedTensorsPerChannelDynamic) {
  EXPECT_GE(identical(generate("ct_channel", "none"), hf_ids("ct_channel"), "ct_channel"), 6);
}

TEST(Fp8Checkpoints, CompressedTensorsPerTensorStaticInputScale) {
  EXPECT_GE(identical(generate("ct_tensor", "none"), hf_ids("ct_tensor"), "ct_tensor"), 6);
}

TEST(Fp8Checkpoints, QuantizationFlagOnTwinGivesPerChannelIds) {
  const Ids twin = generate("twin_fp32", "fp8");
  EXPECT_GE(identical(twin, hf_ids("ct_channel"), "twin_fp32 --quantization fp8 vs ct_channel"), 6);
  // Same codes and scales as the checkpoint: the two CPU runs agree token for token.
  EXPECT_EQ(twin, generate("ct_channel", "fp8"));
}

TEST(Fp8Checkpoints, BlockLayoutFirstTokenEqualsHf) {
  const Ids got = generate("fp8_block", "none"), want = hf_ids("fp8_block");
  int same = 0;
  for (size_t p = 0; p < want.size(); ++p) same += got.at(p).at(0) == want[p].at(0);
  std::cout << "fp8_block: first token identical on " << same << " of " << want.size() << " prompts\n";
  // HF runs this layout dequantized to bf16 on the CPU (we dequantize to fp32), which moves a close
  // first token on a couple of prompts of a random model; a wrong block scale moves all of them.
  EXPECT_GE(same, 9);
}

TEST(Fp8Checkpoints, DummyWeightsQuantizeAtLoad) {
  const Ids dense = generate("twin_fp32", "none", true), fp8 = generate("twin_fp32", "fp8", true);
  ASSERT_EQ(fp8.size(), dense.size());
  for (const auto& ids : fp8)
    for (int32_t t : ids) EXPECT_TRUE(t >= 0 && t < 384) << t;
  EXPECT_NE(fp8, dense);  // the quantized linears are what ran
}

TEST(Fp8Checkpoints, OtherSchemesAreRefusedByName) {
  std::ifstream in(testing::data_path("fp8/ct_channel/config.json"));
  const json base = json::parse(in);
  struct Case {
    const char* pointer;
    json value;
    const char* needle;
  };
  for (const Case& c : {Case{"/quantization_config/config_groups/group_0/weights/num_bits", 4, "8-bit float"},
                        Case{"/quantization_config/config_groups/group_0/weights/type", "int", "type 'int'"},
                        Case{"/quantization_config/config_groups/group_0/weights/strategy", "group", "'group'"},
                        Case{"/quantization_config/format", "pack-quantized", "'pack-quantized'"},
                        Case{"/quantization_config/ignore", json::array({"model.layers.0.mlp.down_proj"}),
                             "model.layers.0.mlp.down_proj"},
                        Case{"/quantization_config/kv_cache_scheme", json::object({{"num_bits", 8}}), "kv_cache_scheme"},
                        Case{"/quantization_config/kv_cache_scheme",
                             json::object({{"num_bits", 8}, {"type", "float"}, {"strategy", "attn_head"}}), "'attn_head'"},
                        Case{"/quantization_config/kv_cache_scheme",
                             json::object({{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", true}}),
                             "kv_cache_scheme.dynamic"},
                        Case{"/quantization_config/config_groups/group_0/input_activations", nullptr,
                             "weight-only"}}) {
    json cfg = base;
    cfg[json::json_pointer(c.pointer)] = c.value;
    try {
      model_spec_from_config_json(cfg, "test/config.json");
      ADD_FAILURE() << c.pointer << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace conveyor
