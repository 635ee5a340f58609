// GGUF dequantization is bit-identical to the `gguf` Python package: on a file of random blocks of
// every supported type (scripts/gguf_reference.py), on the real SmolLM2 GGUF (every element, through
// exact checksums, plus the first 4096 values), and on random blocks against a plain per-element
// reading of the GGML block layouts written here.
#include "runtime/model/gguf_dequant.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "kernels/dtype.h"
#include "runtime/model/gguf_file.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

// "" when got and want are bitwise equal, else the first differing index and values.
std::string bitwise_diff(const float* got, const float* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b) return "index " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
  }
  return "";
}

std::vector<float> dequantize_all(const GgufFile& f, const GgufTensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  gguf_dequantize(t.type, f.tensor_data(t), t.numel(), out.data());
  return out;
}

TEST(GgufDequant, MatchesTheGgufPackageOnRandomBlocksOfEveryType) {
  GgufFile f(testing::data_path("formats/quant_blocks.gguf"));
  for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"}) {
    SCOPED_TRACE(type);
    const GgufTensorInfo* t = f.find_tensor(type);
    ASSERT_NE(t, nullptr);
    EXPECT_STREQ(ggml_type_name(t->type), type);
    std::vector<float> want = testing::read_f32_file(testing::data_path(std::string("formats/quant_blocks/") + type + ".f32"));
    ASSERT_EQ(want.size(), static_cast<size_t>(t->numel()));
    std::vector<float> got = dequantize_all(f, *t);
    EXPECT_EQ(bitwise_diff(got.data(), want.data(), got.size()), "");
  }
}

TEST(GgufDequant, MatchesTheGgufPackageOnTheRealModel) {
  std::string path = testing::test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  GgufFile f(path);
  nlohmann::json ref = nlohmann::json::parse(std::ifstream(testing::data_path("formats/smollm2_ref.json")));
  ASSERT_GE(ref.size(), 5u);
  for (auto it = ref.begin(); it != ref.end(); ++it) {
    SCOPED_TRACE(it.key());
    const GgufTensorInfo* t = f.find_tensor(it.key());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(ggml_type_name(t->type), (*it)["type"].get<std::string>());
    std::vector<float> got = dequantize_all(f, *t);
    ASSERT_EQ(got.size(), (*it)["numel"].get<size_t>());
    std::vector<float> first = testing::read_f32_file(testing::data_path("formats/smollm2/" + it.key() + ".f32"));
    EXPECT_EQ(bitwise_diff(got.data(), first.data(), first.size()), "");
    uint64_t bits_sum = 0, bits_wsum = 0;  // wrapping, as numpy's uint64
    double sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, &got[i], 4);
      bits_sum += b;
      bits_wsum += static_cast<uint64_t>(b) * (i + 1);
      sum += got[i];
    }
    EXPECT_EQ(std::to_string(bits_sum), (*it)["bits_sum"].get<std::string>());
    EXPECT_EQ(std::to_string(bits_wsum), (*it)["bits_wsum"].get<std::string>());
    // The float64 sums differ only by summation order (numpy sums pairwise).
    EXPECT_NEAR(sum, (*it)["sum"].get<double>(), 1e-9 * (1.0 + std::abs(sum)));
  }
}

// --- plain per-element references ---------------------------------------------------------------

float h2f(const uint8_t* p) { return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// Value of element e of one block, read straight off the layout.
float ref_element(GgmlType type, const uint8_t* b, int e) {
  switch (type) {
    case GgmlType::kQ8_0: return static_cast<float>(static_cast<int8_t>(b[2 + e])) * h2f(b);
    case GgmlType::kQ4_0: {
      int q = e < 16 ? (b[2 + e] & 15) : (b[2 + e - 16] >> 4);
      return h2f(b) * static_cast<float>(q - 8);
    }
    case GgmlType::kQ4_1: {
      int q = e < 16 ? (b[4 + e] & 15) : (b[4 + e - 16] >> 4);
      float dq = h2f(b) * static_cast<float>(q);
      return dq + h2f(b + 2);
    }
    case GgmlType::kQ4_K: {
      int sub = e / 32;
      const uint8_t* s = b + 4;
      int sc = sub < 4 ? s[sub] & 63 : (s[sub + 4] & 15) | ((s[sub - 4] >> 6) << 4);
      int mn = sub < 4 ? s[sub + 4] & 63 : (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
      int byte = (sub / 2) * 32 + e % 32;
      int q = sub % 2 == 0 ? (b[16 + byte] & 15) : (b[16 + byte] >> 4);
      float ds = h2f(b) * static_cast<float>(sc), dm = h2f(b + 2) * static_cast<float>(mn);
      float v = ds * static_cast<float>(q);
      return v - dm;
    }
    case GgmlType::kQ6_K: {
      int half = e / 128, r = e % 128;
      int ql = b[half * 64 + r % 64], qh = b[128 + half * 32 + r % 32];
      int lo = r < 64 ? (ql & 15) : (ql >> 4);
      int hi = (qh >> (2 * (r / 32))) & 3;
      float ds = h2f(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + e / 16]));
      return ds * static_cast<float>((lo | (hi << 4)) - 32);
    }
    default: return 0;
  }
}

TEST(GgufDequant, QuantizedBlocksFollowTheLayoutPerElement) {
  std::mt19937 rng(99);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(type));
    const int blocks = 37;
    std::vector<uint8_t> raw(static_cast<size_t>(blocks * tr->block_bytes));
    for (auto& x : raw) x = static_cast<uint8_t>(rng());
    // Finite f16 scales at the offsets each layout keeps them.
    std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
    for (int k = 0; k < blocks; ++k) {
      uint8_t* b = raw.data() + k * tr->block_bytes;
      std::vector<int> at = type == GgmlType::kQ6_K ? std::vector<int>{208}
                            : type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K ? std::vector<int>{0, 2}
                                                                                 : std::vector<int>{0};
      for (int o : at) {
        uint16_t h = float_to_f16(scale(rng));
        std::memcpy(b + o, &h, 2);
      }
    }
    int64_t n = blocks * tr->block_elems;
    std::vector<float> got(static_cast<size_t>(n)), want(got.size());
    gguf_dequantize(type, raw.data(), n, got.data());
    for (int64_t i = 0; i < n; ++i)
      want[static_cast<size_t>(i)] = ref_element(type, raw.data() + (i / tr->block_elems) * tr->block_bytes,
                                                  static_cast<int>(i % tr->block_elems));
    EXPECT_EQ(bitwise_diff(got.data(), want.data(), got.size()), "");
    size_t nonzero = 0;
    for (float v : got) nonzero += v != 0.0f;
    EXPECT_GT(nonzero, got.size() / 2);
  }
}

TEST(GgufDequant, EmptyTensorsTouchNothing) {  // found by gguf_fuzz: memcpy(nullptr, p, 0)
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    EXPECT_NO_THROW(gguf_dequantize(t, nullptr, 0, nullptr)) << ggml_type_name(t);
    std::vector<float> out(4, 7.5f);  // zero elements from no bytes: the output stays as it was
    EXPECT_NO_THROW(gguf_dequantize(t, nullptr, 0, out.data())) << ggml_type_name(t);
    EXPECT_EQ(out, std::vector<float>(4, 7.5f)) << ggml_type_name(t);
  }
}

TEST(GgufDequant, RefusesTypesItCannotDecode) {
  std::vector<uint8_t> raw(176);
  std::vector<float> out(256);
  testing::expect_error([&] { gguf_dequantize(GgmlType::kQ5_K, raw.data(), 256, out.data()); },
                        "cannot dequantize GGML type Q5_K");
  testing::expect_error([&] { gguf_dequantize(GgmlType::kQ8_0, raw.data(), 31, out.data()); },
                        "not a multiple of the block size 32");
}

}  // namespace
}  // namespace conveyor
