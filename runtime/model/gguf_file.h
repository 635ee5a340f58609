// Reader for GGUF v2/v3 files (llama.cpp's single-file model format): header, typed metadata,
// tensor infos and the aligned data area. Everything read from the file is bounds-checked against the
// bytes that remain, so a corrupt or hostile file is rejected with an error naming the file, the
// offset and the key or tensor, never read out of bounds. Dimensions are kept in GGML order (ne0 is
// the contiguous one); shape() gives the usual row-major order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/model/mmap_file.h"

namespace conveyor {

class Tokenizer;
struct GgufTokenizerMetadata;

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Integers land in `u` / `i` (both set when representable), floats in `f`.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  GgufValueType elem_type = GgufValueType::kU8;  // arrays only
  std::vector<GgufValue> array;

  bool is_integer() const;
  std::string type_text() const;  // "u32", "array[string]", ...
  std::string short_text() const;  // value for display, arrays abbreviated
};

// GGML tensor types known to this reader (sizes from the GGML spec). Only some can be dequantized.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35,
};
struct GgmlTypeTraits {
  const char* name;
  int64_t block_elems;  // elements per block
  int64_t block_bytes;  // bytes per block
};
// Traits of a type id, or nullptr when the id is unknown.
const GgmlTypeTraits* ggml_type_traits(uint32_t type_id);
const char* ggml_type_name(GgmlType t);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // GGML order: dims[0] is contiguous
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data area, a multiple of the alignment
  uint64_t nbytes = 0;
  int64_t numel() const;
  std::vector<int64_t> shape() const;  // row-major order (dims reversed)
  int64_t row_elems() const { return dims.empty() ? 1 : dims[0]; }
};

struct GgufContents {
  uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<GgufTensorInfo> tensors;                      // file order
  uint64_t alignment = 32;
  size_t data_start = 0;  // absolute offset of the data area
};

// Parses a whole file image; `name` is used in messages. Exposed for the fuzzer.
GgufContents parse_gguf(const uint8_t* data, size_t size, const std::string& name);

constexpr int kGgufMaxDims = 4;
constexpr int kGgufMaxArrayDepth = 8;  // nested arrays deeper than this are refused

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return contents_.version; }
  uint64_t alignment() const { return contents_.alignment; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return contents_.metadata; }
  const std::vector<GgufTensorInfo>& tensors() const { return contents_.tensors; }

  bool has(const std::string& key) const { return index_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  // Typed accessors: throw naming the key (and the type found) when absent or of the wrong type.
  // Integer getters accept any integer type whose value fits; get_f32 accepts f32 and f64.
  std::string get_string(const std::string& key) const;
  uint32_t get_u32(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  float get_f32(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int32_t> get_i32_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;

  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return file_.data() + contents_.data_start + t.offset; }

 private:
  const GgufValue& require(const std::string& key, const char* wanted) const;

  MappedFile file_;
  GgufContents contents_;
  std::map<std::string, size_t> index_;         // key -> metadata position
  std::map<std::string, size_t> tensor_index_;  // name -> tensors position
};

// The tokenizer.ggml.* keys of a file (defined in runtime/tokenizer/from_gguf.cpp, beside the tokenizer they build).
// Throws naming the file and the key when one is absent, of the wrong type or out of range.
GgufTokenizerMetadata gguf_tokenizer_metadata(const GgufFile& gguf);
// Whether the file carries a vocabulary (tokenizer.ggml.tokens, model not "none"); converters write
// tokenizer.ggml.model alone for files without one.
bool gguf_has_tokenizer(const GgufFile& gguf);
// The file's tokenizer; errors name the file. Call only when gguf_has_tokenizer(gguf).
Tokenizer tokenizer_from_gguf(const GgufFile& gguf);

}  // namespace conveyor
