// safetensors reader: the tiny checkpoints load (single and sharded, bit-identical), and every
// rejection of the validator fires on a crafted file with a message naming file, tensor and problem.
#include "runtime/model/safetensors_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "kernels/dtype.h"
#include "runtime/model/weights_source.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::data_path;
using testing::expect_error;

// A file image: 8-byte length, header text, then `data_bytes` bytes of data.
std::vector<uint8_t> st_image(const std::string& header, size_t data_bytes, uint8_t fill = 0x3c) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data_bytes, fill);
  return out;
}

void parse(const std::vector<uint8_t>& img) { parse_safetensors(img.data(), img.size(), "crafted.safetensors"); }

TEST(Safetensors, LoadsTinyCheckpointWithShapesAndDtype) {
  SafetensorsFile f(data_path("formats/tiny_llama/model.safetensors"));
  const SafetensorsTensor* q = f.find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, SafetensorsDType::kBF16);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(q->nbytes(), 32u * 32u * 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.tensors().size(), 3u + 4u * 9u);
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(Safetensors, ShardedEqualsSingleBitForBit) {
  auto single = open_weight_source(data_path("formats/tiny_llama"));
  auto sharded = open_weight_source(data_path("formats/tiny_llama_sharded"));
  ASSERT_EQ(single->tensors().size(), sharded->tensors().size());
  for (const auto& t : single->tensors()) {
    const SourceTensor& u = sharded->at(t.name);
    ASSERT_EQ(t.shape, u.shape) << t.name;
    std::vector<float> a(static_cast<size_t>(t.numel())), b(a.size());
    single->read_range(t.name, 0, t.numel(), a.data());
    sharded->read_range(t.name, 0, t.numel(), b.data());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << t.name;
    for (float x : a) ASSERT_TRUE(std::isfinite(x) && x != 0.0f) << t.name;
  }
}

TEST(Safetensors, ConvertsEveryDtypeExactly) {
  std::vector<float> src = testing::random_floats(64, 11);
  std::vector<uint8_t> f16(128), bf16(128);
  for (size_t i = 0; i < 64; ++i) {
    uint16_t h = float_to_f16(src[i]), b = float_to_bf16(src[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  std::vector<float> out(64);
  safetensors_to_f32(SafetensorsDType::kF16, f16.data(), 64, out.data());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], f16_to_float(float_to_f16(src[i]))) << i;
  safetensors_to_f32(SafetensorsDType::kBF16, bf16.data(), 64, out.data());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], bf16_to_float(float_to_bf16(src[i]))) << i;
  safetensors_to_f32(SafetensorsDType::kF32, reinterpret_cast<const uint8_t*>(src.data()), 64, out.data());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], src[i]) << i;
  // E4M3: every finite code against its definition, (-1)^s * 2^(e-7) * (1 + m/8), subnormal 2^-6 * m/8.
  for (int v = 0; v < 256; ++v) {
    uint8_t b = static_cast<uint8_t>(v);
    float got;
    safetensors_to_f32(SafetensorsDType::kF8E4M3, &b, 1, &got);
    int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7) {
      ASSERT_TRUE(std::isnan(got)) << v;
      continue;
    }
    double want = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    ASSERT_EQ(got, static_cast<float>(s ? -want : want)) << v;
  }
}

TEST(Safetensors, AcceptsEmptyAndZeroSizedTensors) {
  parse(st_image("{}", 0));
  parse(st_image(R"({"__metadata__":{"a":"b"},"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
                 R"("x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4));
}

struct BadCase {
  const char* what;
  std::vector<uint8_t> image;
  const char* needle;
};

std::vector<BadCase> bad_cases() {
  auto one = [](const std::string& t) { return R"({"w":)" + t + "}"; };
  std::vector<uint8_t> huge = st_image("{}", 0);
  huge[4] = 0x10;  // header length 2^36
  std::vector<uint8_t> past = st_image("{}", 0);
  past[0] = 40;  // claims 40 header bytes, file has 2
  return {
      {"shorter than 8 bytes", {1, 2, 3}, "shorter than the 8-byte header length"},
      {"header over 100 MB", huge, "exceeds the 100 MB limit"},
      {"header past EOF", past, "runs past the end of the file"},
      {"not JSON", st_image("{nope", 0), "not valid JSON"},
      {"not an object", st_image("[1,2]", 0), "must be a JSON object"},
      {"entry not object", st_image(one("3"), 0), "must be an object"},
      {"missing dtype", st_image(one(R"({"shape":[1],"data_offsets":[0,4]})"), 4), "lacks 'dtype'"},
      {"missing shape", st_image(one(R"({"dtype":"F32","data_offsets":[0,4]})"), 4), "lacks 'shape'"},
      {"missing offsets", st_image(one(R"({"dtype":"F32","shape":[1]})"), 4), "lacks 'data_offsets'"},
      {"unsupported dtype", st_image(one(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})"), 8), "dtype 'I64'"},
      {"negative dim", st_image(one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), 4), "non-negative"},
      {"offsets reversed", st_image(one(R"({"dtype":"F32","shape":[0],"data_offsets":[4,0]})"), 4), "end before"},
      {"offsets not a pair", st_image(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"), 4), "[begin, end]"},
      {"size mismatch", st_image(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"), 4), "needs 8 bytes"},
      {"shape overflow",
       st_image(one(R"({"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,4]})"), 4), "overflows"},
      {"byte size overflow",
       st_image(one(R"({"dtype":"F32","shape":[4611686018427387904,2],"data_offsets":[0,4]})"), 4), "overflows"},
      {"first not at 0", st_image(one(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), 8), "begins at data offset 4"},
      {"gap", st_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12), "tensor 'b' begins"},
      {"overlap", st_image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "non-overlapping"},
      {"data past EOF", st_image(one(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), 8), "is 71 bytes but its header describes 79 bytes; the file is truncated"},
      {"trailing data", st_image(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), 12), "holds 12 bytes"},
      {"metadata not strings", st_image(R"({"__metadata__":{"a":1}})", 0), "__metadata__ value for 'a'"},
      {"metadata not object", st_image(R"({"__metadata__":[1]})", 0), "__metadata__ must be"},
  };
}

TEST(Safetensors, RejectsEveryMalformedFileClearly) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    std::string msg = expect_error([&] { parse(c.image); }, c.needle);
    EXPECT_NE(msg.find("crafted.safetensors"), std::string::npos) << msg;
  }
}

TEST(Safetensors, ErrorsNameTheFileOnDisk) {
  std::string dir = testing::temp_dir("st_bad");
  std::string path = dir + "/model.safetensors";
  testing::write_bytes(path, bad_cases()[13].image);
  std::string msg = expect_error([&] { SafetensorsFile f(path); }, path);
  EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
  expect_error([&] { SafetensorsFile f(dir + "/missing.safetensors"); }, "cannot open");
}

// Sharded checkpoints: a shard missing, a tensor stored twice, and a weight_map entry that lies.
TEST(Safetensors, RejectsInconsistentShards) {
  namespace fs = std::filesystem;
  std::string dir = testing::temp_dir("st_shards");
  auto tensor = [](const char* name) {
    return st_image(std::string(R"({")") + name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  };
  testing::write_bytes(dir + "/a.safetensors", tensor("x"));
  testing::write_bytes(dir + "/b.safetensors", tensor("x"));
  auto index = [&](const std::string& map) {
    std::ofstream(dir + "/model.safetensors.index.json") << R"({"metadata":{},"weight_map":)" << map << "}";
  };
  index(R"({"x":"a.safetensors","y":"c.safetensors"})");
  expect_error([&] { open_weight_source(dir); }, "c.safetensors' does not exist");
  index(R"({"x":"a.safetensors","y":"b.safetensors"})");
  expect_error([&] { open_weight_source(dir); }, "appears in both");
  testing::write_bytes(dir + "/b.safetensors", tensor("z"));
  expect_error([&] { open_weight_source(dir); }, "maps tensor 'y' to 'b.safetensors' but that shard does not hold it");
  index(R"({"x":"../a.safetensors"})");
  expect_error([&] { open_weight_source(dir); }, "not a file in the directory");
  index(R"([1])");
  expect_error([&] { open_weight_source(dir); }, "no weight_map");
  fs::remove(dir + "/model.safetensors.index.json");
  expect_error([&] { open_weight_source(dir); }, "neither model.safetensors.index.json nor model.safetensors");
}

}  // namespace
}  // namespace conveyor
