// GGUF reader: the tiny and the real model parse with the right metadata and tensor infos, typed
// accessors report key and found type, and every rejection fires on a crafted file. Every prefix of
// a valid file is rejected cleanly (never read out of bounds; CI runs this under ASan/UBSan).
#include "runtime/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::expect_error;

// Writes GGUF images byte by byte so each field can be made wrong on purpose.
struct GgufBuilder {
  std::vector<uint8_t> b;
  template <typename T>
  GgufBuilder& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  GgufBuilder& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBuilder& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  }
  GgufBuilder& kv_u32(const std::string& k, uint32_t v) { return str(k).put<uint32_t>(4).put<uint32_t>(v); }
  GgufBuilder& kv_str(const std::string& k, const std::string& v) { return str(k).put<uint32_t>(8).str(v); }
  GgufBuilder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  GgufBuilder& pad_to(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  GgufBuilder& data(size_t n) {
    for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(i * 7 + 1));
    return *this;
  }
};

// A valid file: every metadata type (nested arrays too), two tensors, alignment 64.
std::vector<uint8_t> valid_image() {
  GgufBuilder g;
  g.header(2, 17).kv_u32("general.alignment", 64).kv_str("general.architecture", "llama");
  g.str("u8").put<uint32_t>(0).put<uint8_t>(200).str("i8").put<uint32_t>(1).put<int8_t>(-3);
  g.str("u16").put<uint32_t>(2).put<uint16_t>(60000).str("i16").put<uint32_t>(3).put<int16_t>(-300);
  g.str("u32").put<uint32_t>(4).put<uint32_t>(4000000000u).str("i32").put<uint32_t>(5).put<int32_t>(-70000);
  g.str("f32").put<uint32_t>(6).put<float>(1.5f).str("bool").put<uint32_t>(7).put<uint8_t>(1);
  g.str("str").put<uint32_t>(8).str("s").str("u64").put<uint32_t>(10).put<uint64_t>(1ull << 40);
  g.str("i64").put<uint32_t>(11).put<int64_t>(-5).str("f64").put<uint32_t>(12).put<double>(2.25);
  g.str("nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2);  // array of arrays
  g.put<uint32_t>(5).put<uint64_t>(2).put<int32_t>(7).put<int32_t>(-8);
  g.put<uint32_t>(8).put<uint64_t>(1).str("deep");
  g.str("floats").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(2).put<float>(0.5f).put<float>(-1.f);
  g.str("flag").put<uint32_t>(7).put<uint8_t>(1);
  g.tensor("a", {32, 2}, 8, 0).tensor("b", {4}, 0, 128);
  g.pad_to(64).data(128 + 16);
  return g.b;
}

GgufContents parse(const std::vector<uint8_t>& img) { return parse_gguf(img.data(), img.size(), "crafted.gguf"); }

TEST(Gguf, ParsesEveryValueTypeAndTensorInfo) {
  GgufContents c = parse(valid_image());
  EXPECT_EQ(c.version, 3u);
  EXPECT_EQ(c.alignment, 64u);
  ASSERT_EQ(c.metadata.size(), 17u);
  auto at = [&](size_t i) -> const GgufValue& { return c.metadata[i].second; };
  EXPECT_EQ(at(2).u, 200u);
  EXPECT_EQ(at(3).i, -3);
  EXPECT_EQ(at(4).u, 60000u);
  EXPECT_EQ(at(5).i, -300);
  EXPECT_EQ(at(6).u, 4000000000u);
  EXPECT_EQ(at(7).i, -70000);
  EXPECT_EQ(at(8).f, 1.5);
  EXPECT_TRUE(at(9).b);
  EXPECT_EQ(at(10).s, "s");
  EXPECT_EQ(at(11).u, 1ull << 40);
  EXPECT_EQ(at(12).i, -5);
  EXPECT_EQ(at(13).f, 2.25);
  for (size_t i = 2; i <= 13; ++i) EXPECT_EQ(static_cast<uint32_t>(at(i).type), i <= 10 ? i - 2 : i - 1) << i;
  const GgufValue& n = c.metadata[14].second;
  EXPECT_EQ(n.type_text(), "array[array[i32]]");
  EXPECT_EQ(n.array[0].array[1].i, -8);
  EXPECT_EQ(n.array[1].array[0].s, "deep");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].shape(), (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(c.tensors[0].nbytes, 2u * 34u);
  EXPECT_EQ(c.tensors[1].offset, 128u);
  EXPECT_EQ(c.data_start % 64, 0u);
}

TEST(Gguf, TypedAccessorsNameKeyAndFoundType) {
  std::string path = testing::temp_dir("gguf_acc") + "/m.gguf";
  testing::write_bytes(path, valid_image());
  GgufFile f(path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("general.alignment"), 64u);
  EXPECT_EQ(f.get_f32_array("floats"), (std::vector<float>{0.5f, -1.f}));
  EXPECT_TRUE(f.get_bool("flag"));
  expect_error([&] { f.get_u32("general.architecture"); }, "key 'general.architecture' is string");
  expect_error([&] { f.get_string("flag"); }, "key 'flag' is bool, wanted string");
  expect_error([&] { f.get_string_array("floats"); }, "key 'floats' is array[f32], wanted array[string]");
  expect_error([&] { f.get_i32_array("nested"); }, "wanted array[i32]");
  expect_error([&] { f.get_u32("i8"); }, "key 'i8' is i8 -3, wanted a non-negative integer");
  EXPECT_EQ(f.get_i64("i64"), -5);
  EXPECT_EQ(f.get_u64("u64"), 1ull << 40);
  expect_error([&] { f.get_u32("u64"); }, "does not fit in u32");
  expect_error([&] { f.get_f32("missing.key"); }, "no metadata key 'missing.key'");
  ASSERT_NE(f.find_tensor("b"), nullptr);
  float first;
  std::memcpy(&first, f.tensor_data(*f.find_tensor("b")), 4);
  std::vector<uint8_t> img = valid_image();
  float want;
  std::memcpy(&want, img.data() + f.find_tensor("b")->offset + (img.size() - 144), 4);
  EXPECT_EQ(first, want);
}

TEST(Gguf, ReadsTheTinyModelWrittenByTheGgufPackage) {
  GgufFile f(testing::data_path("formats/tiny_llama.gguf"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 4u);
  EXPECT_EQ(f.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  const GgufTensorInfo* q = f.find_tensor("blk.2.attn_k.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(q->type, GgmlType::kF32);
}

TEST(Gguf, ReadsTheRealSmolLM2Metadata) {
  std::string path = testing::test_model_path();
  CONVEYOR_REQUIRE_TEST_MODEL(path);
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type").size(), 49152u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges").size(), 48900u);
  EXPECT_EQ(f.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  const GgufTensorInfo* e = f.find_tensor("token_embd.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, GgmlType::kQ8_0);
  EXPECT_EQ(e->shape(), (std::vector<int64_t>{49152, 576}));
}

struct BadCase {
  const char* what;
  std::vector<uint8_t> image;
  const char* needle;
};

std::vector<BadCase> bad_cases() {
  auto g = [] { return GgufBuilder(); };
  auto one_tensor = [](std::vector<uint64_t> dims, uint32_t type, uint64_t off, size_t data) {
    GgufBuilder b;
    b.header(1, 0).tensor("t", dims, type, off).pad_to(32).data(data);
    return b.b;
  };
  std::vector<uint8_t> bad_magic = valid_image();
  bad_magic[0] = 'X';
  GgufBuilder dup_key = g();
  dup_key.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  GgufBuilder dup_tensor = g();
  dup_tensor.header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).pad_to(32).data(64);
  GgufBuilder long_str = g();
  long_str.header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1000).data(10);
  GgufBuilder long_key = g();
  long_key.header(0, 1).put<uint64_t>(~0ull).data(16);
  GgufBuilder big_array = g();
  big_array.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 60).data(16);
  GgufBuilder bad_vtype = g();
  bad_vtype.header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0);
  GgufBuilder bad_elem = g();
  bad_elem.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).put<uint64_t>(0);
  GgufBuilder deep = g();
  deep.header(0, 1).str("k");
  deep.put<uint32_t>(9);  // the value is an array whose element is an array whose element is ...
  for (int i = 0; i < 10; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(0).put<uint64_t>(1).data(8);
  GgufBuilder bad_bool = g();
  bad_bool.header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2);
  GgufBuilder align3 = g();
  align3.header(0, 1).kv_u32("general.alignment", 3);
  GgufBuilder align0 = g();
  align0.header(0, 1).kv_u32("general.alignment", 0);
  GgufBuilder align_type = g();
  align_type.header(0, 1).kv_str("general.alignment", "32");
  return {
      {"bad magic", bad_magic, "is not a GGUF file"},
      {"version 1", g().header(0, 0, 1).b, "has version 1"},
      {"version 4", g().header(0, 0, 4).b, "has version 4"},
      {"truncated header", {'G', 'G', 'U', 'F', 3, 0}, "truncated"},
      {"absurd tensor count", g().header(1ull << 50, 0).b, "claims 1125899906842624 tensors"},
      {"absurd kv count", g().header(0, 1ull << 40).b, "metadata entries"},
      {"duplicate key", dup_key.b, "duplicate metadata key 'k'"},
      {"duplicate tensor", dup_tensor.b, "duplicate tensor name 't'"},
      {"string past end", long_str.b, "claims 1000 bytes"},
      {"key length past end", long_key.b, "metadata key"},
      {"array past end", big_array.b, "claims an array of"},
      {"unknown value type", bad_vtype.b, "unknown value type 13"},
      {"unknown array element type", bad_elem.b, "unknown value type 99"},
      {"arrays nested too deep", deep.b, "nests arrays deeper"},
      {"bool not 0/1", bad_bool.b, "bool byte 2"},
      {"alignment not power of two", align3.b, "alignment 3 is not a power of two"},
      {"alignment zero", align0.b, "alignment 0 is not a power of two"},
      {"alignment wrong type", align_type.b, "general.alignment must be u32"},
      {"five dims", one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), "has 5 dimensions"},
      {"zero dims", one_tensor({}, 0, 0, 32), "has 0 dimensions"},
      {"unknown tensor type", one_tensor({4}, 5, 0, 32), "unknown tensor type 5"},
      {"row not whole blocks", one_tensor({33}, 8, 0, 64), "not a multiple of its block size 32"},
      {"offset not aligned", one_tensor({4}, 0, 4, 64), "not a multiple of the alignment 32"},
      {"offset past EOF", one_tensor({4}, 0, 64, 32), "is 96 bytes but its header describes 144 bytes"},
      {"data past EOF", one_tensor({64}, 0, 0, 32), "is 96 bytes but its header describes 320 bytes"},
      {"offset overflow", one_tensor({4}, 0, ~0ull - 31, 32), "past the end"},
      {"dims overflow", one_tensor({1ull << 32, 1ull << 32, 16}, 0, 0, 32), "overflows 64 bits"},
      {"elements past int64", one_tensor({1ull << 32, 1ull << 31}, 0, 0, 32), "more than 2^63 - 1"},
  };
}

TEST(Gguf, RejectsEveryMalformedFileClearly) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.what);
    std::string msg = expect_error([&] { parse(c.image); }, c.needle);
    EXPECT_NE(msg.find("crafted.gguf"), std::string::npos) << msg;
  }
}

// Found by gguf_fuzz: an empty tensor whose zero dimension comes after two whose product passes int64 (numel()
// multiplied in int64 and overflowed before reaching the zero).
TEST(Gguf, AnEmptyTensorAfterLargeDimensionsHasNoElements) {
  GgufBuilder b;
  b.header(1, 0).tensor("t", {1ull << 32, 1ull << 31, 0}, 0, 0).pad_to(32).data(32);  // 2^63, then 0
  const GgufContents c = parse(b.b);
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors[0].numel(), 0);
  EXPECT_EQ(c.tensors[0].nbytes, 0u);
}

TEST(Gguf, EveryTruncationOfAValidFileIsRejected) {
  std::vector<uint8_t> img = valid_image();
  for (size_t n = 0; n + 16 < img.size(); ++n) {  // the last tensor ends 16 bytes before EOF
    std::vector<uint8_t> cut(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), Error) << "prefix of " << n << " bytes";
  }
}

TEST(Gguf, ErrorsNameThePathOnDisk) {
  std::string path = testing::temp_dir("gguf_bad") + "/bad.gguf";
  testing::write_bytes(path, bad_cases()[6].image);
  expect_error([&] { GgufFile f(path); }, path);
}

}  // namespace
}  // namespace conveyor
