// GGUF parsing (see gguf_file.h). A Cursor reads little-endian values and checks each read against
// the bytes left, so every length and count in the file is validated before it sizes an allocation.
#include "runtime/model/gguf_file.h"

#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32

class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

  void need(uint64_t n, const char* what) const {
    CONVEYOR_CHECK(n <= left(), "GGUF file '", name_, "': ", what, " at offset ", pos_, " needs ", n,
                   " bytes but only ", left(), " remain; the file is truncated or corrupt");
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // GGUF is little-endian, as are our hosts
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    size_t at = pos_;
    uint64_t len = read<uint64_t>(what);
    CONVEYOR_CHECK(len <= left(), "GGUF file '", name_, "': ", what, " at offset ", at, " claims ", len,
                   " bytes but only ", left(), " remain; the file is corrupt");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string name_;
};

// Smallest encoding of one value of a type: bounds an array's element count by the bytes left.
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
    case GgufValueType::kU16: case GgufValueType::kI16: return 2;
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 12;
  }
  return 1;
}

GgufValueType read_value_type(Cursor& c, const std::string& key) {
  size_t at = c.pos();
  uint32_t t = c.read<uint32_t>("value type");
  CONVEYOR_CHECK(t <= static_cast<uint32_t>(GgufValueType::kF64), "GGUF file '", c.name(), "': key '", key,
                 "' has unknown value type ", t, " at offset ", at, "; the file is corrupt or from a newer GGUF");
  return static_cast<GgufValueType>(t);
}

template <typename T>
void set_int(GgufValue& v, T x) {
  if constexpr (std::is_signed_v<T>) {
    v.i = x;
    v.u = x >= 0 ? static_cast<uint64_t>(x) : 0;
  } else {
    v.u = x;
    v.i = x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? static_cast<int64_t>(x) : 0;
  }
}

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kU8: set_int(v, c.read<uint8_t>("u8 value")); break;
    case GgufValueType::kI8: set_int(v, c.read<int8_t>("i8 value")); break;
    case GgufValueType::kU16: set_int(v, c.read<uint16_t>("u16 value")); break;
    case GgufValueType::kI16: set_int(v, c.read<int16_t>("i16 value")); break;
    case GgufValueType::kU32: set_int(v, c.read<uint32_t>("u32 value")); break;
    case GgufValueType::kI32: set_int(v, c.read<int32_t>("i32 value")); break;
    case GgufValueType::kU64: set_int(v, c.read<uint64_t>("u64 value")); break;
    case GgufValueType::kI64: set_int(v, c.read<int64_t>("i64 value")); break;
    case GgufValueType::kF32: v.f = c.read<float>("f32 value"); break;
    case GgufValueType::kF64: v.f = c.read<double>("f64 value"); break;
    case GgufValueType::kBool: {
      size_t at = c.pos();
      uint8_t b = c.read<uint8_t>("bool value");
      CONVEYOR_CHECK(b <= 1, "GGUF file '", c.name(), "': key '", key, "' has bool byte ", int(b), " at offset ", at,
                     " (must be 0 or 1)");
      v.b = b != 0;
      break;
    }
    case GgufValueType::kString: v.s = c.read_string("string value"); break;
    case GgufValueType::kArray: {
      CONVEYOR_CHECK(depth < kGgufMaxArrayDepth, "GGUF file '", c.name(), "': key '", key, "' nests arrays deeper than ",
                     kGgufMaxArrayDepth, " levels; refusing it");
      v.elem_type = read_value_type(c, key);
      size_t at = c.pos();
      uint64_t n = c.read<uint64_t>("array length");
      CONVEYOR_CHECK(n <= c.left() / min_value_bytes(v.elem_type), "GGUF file '", c.name(), "': key '", key,
                     "' claims an array of ", n, " ", gguf_value_type_name(v.elem_type), " at offset ", at,
                     " but only ", c.left(), " bytes remain; the file is corrupt");
      v.array.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) v.array.push_back(read_value(c, v.elem_type, key, depth + 1));
      break;
    }
  }
  return v;
}

void read_metadata(Cursor& c, uint64_t kv_count, GgufContents& out) {
  std::set<std::string> seen;
  for (uint64_t k = 0; k < kv_count; ++k) {
    size_t at = c.pos();
    std::string key = c.read_string("metadata key");
    CONVEYOR_CHECK(seen.insert(key).second, "GGUF file '", c.name(), "': duplicate metadata key '", key,
                   "' at offset ", at, "; the file is corrupt");
    GgufValueType t = read_value_type(c, key);
    out.metadata.emplace_back(key, read_value(c, t, key, 0));
  }
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& file, const std::string& tensor) {
  CONVEYOR_CHECK(b == 0 || a <= std::numeric_limits<uint64_t>::max() / b, "GGUF file '", file, "': tensor '", tensor,
                 "' size overflows 64 bits; the file is corrupt");
  return a * b;
}

GgufTensorInfo read_tensor_info(Cursor& c) {
  GgufTensorInfo t;
  size_t at = c.pos();
  t.name = c.read_string("tensor name");
  uint32_t n_dims = c.read<uint32_t>("tensor n_dims");
  CONVEYOR_CHECK(n_dims >= 1 && n_dims <= kGgufMaxDims, "GGUF file '", c.name(), "': tensor '", t.name, "' at offset ",
                 at, " has ", n_dims, " dimensions (must be 1..", kGgufMaxDims, ")");
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = c.read<uint64_t>("tensor dimension");
    CONVEYOR_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "GGUF file '", c.name(),
                   "': tensor '", t.name, "' dimension ", d, " is ", dim, ", too large");
    numel = checked_mul(numel, dim, c.name(), t.name);
    t.dims.push_back(static_cast<int64_t>(dim));
  }
  // numel() returns an int64.
  CONVEYOR_CHECK(numel <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "GGUF file '", c.name(),
                 "': tensor '", t.name, "' has ", numel, " elements, more than 2^63 - 1; the file is corrupt");
  uint32_t type = c.read<uint32_t>("tensor type");
  const GgmlTypeTraits* tr = ggml_type_traits(type);
  CONVEYOR_CHECK(tr != nullptr, "GGUF file '", c.name(), "': tensor '", t.name, "' has unknown tensor type ", type,
                 "; the file is corrupt or uses a type newer than conveyor knows");
  t.type = static_cast<GgmlType>(type);
  CONVEYOR_CHECK(t.dims[0] % tr->block_elems == 0, "GGUF file '", c.name(), "': tensor '", t.name, "' of type ",
                 tr->name, " has row length ", t.dims[0], ", not a multiple of its block size ", tr->block_elems);
  t.nbytes = checked_mul(numel / static_cast<uint64_t>(tr->block_elems), static_cast<uint64_t>(tr->block_bytes),
                         c.name(), t.name);
  t.offset = c.read<uint64_t>("tensor offset");
  return t;
}

void read_alignment(GgufContents& out, const std::string& name) {
  for (const auto& [key, v] : out.metadata) {
    if (key != "general.alignment") continue;
    CONVEYOR_CHECK(v.type == GgufValueType::kU32, "GGUF file '", name, "': general.alignment must be u32, found ",
                   v.type_text());
    CONVEYOR_CHECK(v.u != 0 && (v.u & (v.u - 1)) == 0, "GGUF file '", name, "': general.alignment ", v.u,
                   " is not a power of two; the file is corrupt");
    out.alignment = v.u;
  }
}

}  // namespace

GgufContents parse_gguf(const uint8_t* data, size_t size, const std::string& name) {
  Cursor c(data, size, name);
  GgufContents out;
  uint32_t magic = c.read<uint32_t>("magic");
  CONVEYOR_CHECK(magic == kGgufMagic, "'", name, "' is not a GGUF file (magic bytes 0x", std::hex, magic,
                 " instead of 'GGUF')");
  out.version = c.read<uint32_t>("version");
  CONVEYOR_CHECK(out.version == 2 || out.version == 3, "GGUF file '", name, "' has version ", out.version,
                 "; conveyor reads GGUF v2 and v3 (little-endian); re-convert the model with a current llama.cpp");
  uint64_t tensor_count = c.read<uint64_t>("tensor count");
  uint64_t kv_count = c.read<uint64_t>("metadata count");
  // Each key/value takes >= 13 bytes and each tensor info >= 24, so larger counts cannot be real.
  CONVEYOR_CHECK(kv_count <= c.left() / 13, "GGUF file '", name, "' claims ", kv_count,
                 " metadata entries, more than its ", size, " bytes could hold; the file is corrupt");
  CONVEYOR_CHECK(tensor_count <= c.left() / 24, "GGUF file '", name, "' claims ", tensor_count,
                 " tensors, more than its ", size, " bytes could hold; the file is corrupt");
  read_metadata(c, kv_count, out);
  read_alignment(out, name);
  CONVEYOR_CHECK(tensor_count <= c.left() / 24, "GGUF file '", name, "' claims ", tensor_count,
                 " tensors, more than the ", c.left(), " bytes after its metadata could hold; the file is corrupt");
  std::set<std::string> seen;
  out.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t k = 0; k < tensor_count; ++k) {
    out.tensors.push_back(read_tensor_info(c));
    CONVEYOR_CHECK(seen.insert(out.tensors.back().name).second, "GGUF file '", name, "': duplicate tensor name '",
                   out.tensors.back().name, "'; the file is corrupt");
  }
  uint64_t start = (c.pos() + out.alignment - 1) / out.alignment * out.alignment;
  CONVEYOR_CHECK(tensor_count == 0 || start <= size, "GGUF file '", name, "': data area would start at ", start,
                 ", past the end of the file (", size, " bytes); the file is truncated");
  out.data_start = static_cast<size_t>(start <= size ? start : size);
  uint64_t data_size = size - out.data_start;
  // The size the header implies, so a truncated download is named as such with both sizes.
  const GgufTensorInfo* last = nullptr;
  for (const auto& t : out.tensors)
    if (t.offset <= std::numeric_limits<uint64_t>::max() - t.nbytes && (!last || t.offset + t.nbytes > last->offset + last->nbytes)) last = &t;
  if (last && last->offset + last->nbytes <= std::numeric_limits<uint64_t>::max() - out.data_start) {
    uint64_t described = out.data_start + last->offset + last->nbytes;
    CONVEYOR_CHECK(described <= size, "GGUF file '", name, "' is ", size, " bytes but its header describes ", described,
                   " bytes (tensor '", last->name, "' ends there); the file is truncated: download it again");
  }
  for (const auto& t : out.tensors) {
    CONVEYOR_CHECK(t.offset % out.alignment == 0, "GGUF file '", name, "': tensor '", t.name, "' offset ", t.offset,
                   " is not a multiple of the alignment ", out.alignment, "; the file is corrupt");
    CONVEYOR_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset, "GGUF file '", name, "': tensor '",
                   t.name, "' occupies data bytes [", t.offset, ", ", t.offset + t.nbytes, ") past the end of the ",
                   data_size, "-byte data area; the file is truncated");
  }
  return out;
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  contents_ = parse_gguf(file_.data(), file_.size(), path);
  for (size_t i = 0; i < contents_.metadata.size(); ++i) index_[contents_.metadata[i].first] = i;
  for (size_t i = 0; i < contents_.tensors.size(); ++i) tensor_index_[contents_.tensors[i].name] = i;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &contents_.tensors[it->second];
}

int64_t GgufTensorInfo::numel() const {
  // In uint64, whose wrap is defined: with a zero dimension the partial products before it may exceed int64 (found by
  // gguf_fuzz); the whole product is <= 2^63 - 1 (read_tensor_info).
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return static_cast<int64_t>(n);
}

std::vector<int64_t> GgufTensorInfo::shape() const { return std::vector<int64_t>(dims.rbegin(), dims.rend()); }

}  // namespace conveyor

// --- metadata values and accessors --------------------------------------------------------------

namespace conveyor {

const char* gguf_value_type_name(GgufValueType t) {
  static const char* kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16: case GgufValueType::kI16:
    case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kU64: case GgufValueType::kI64:
      return true;
    default: return false;
  }
}

std::string GgufValue::type_text() const {
  if (type != GgufValueType::kArray) return gguf_value_type_name(type);
  if (elem_type == GgufValueType::kArray && !array.empty()) return "array[" + array[0].type_text() + "]";
  return std::string("array[") + gguf_value_type_name(elem_type) + "]";
}

std::string GgufValue::short_text() const {
  std::ostringstream os;
  switch (type) {
    case GgufValueType::kString: os << '"' << (s.size() > 60 ? s.substr(0, 57) + "..." : s) << '"'; break;
    case GgufValueType::kBool: os << (b ? "true" : "false"); break;
    case GgufValueType::kF32: case GgufValueType::kF64: os << f; break;
    case GgufValueType::kArray: os << type_text() << " x " << array.size(); break;
    case GgufValueType::kI8: case GgufValueType::kI16: case GgufValueType::kI32: case GgufValueType::kI64: os << i; break;
    default: os << u; break;
  }
  return os.str();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &contents_.metadata[it->second].second;
}

const GgufValue& GgufFile::require(const std::string& key, const char* wanted) const {
  const GgufValue* v = find(key);
  CONVEYOR_CHECK(v != nullptr, "GGUF file '", path(), "' has no metadata key '", key, "' (wanted ", wanted,
                 "); the file was converted without it");
  return *v;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = require(key, "string");
  CONVEYOR_CHECK(v.type == GgufValueType::kString, "GGUF file '", path(), "': key '", key, "' is ", v.type_text(),
                 ", wanted string");
  return v.s;
}

uint64_t GgufFile::get_u64(const std::string& key) const {
  const GgufValue& v = require(key, "an unsigned integer");
  bool negative = v.is_integer() && v.i < 0 && v.u == 0;
  CONVEYOR_CHECK(v.is_integer() && !negative, "GGUF file '", path(), "': key '", key, "' is ", v.type_text(), " ",
                 v.short_text(), ", wanted a non-negative integer");
  return v.u;
}

uint32_t GgufFile::get_u32(const std::string& key) const {
  uint64_t x = get_u64(key);
  CONVEYOR_CHECK(x <= std::numeric_limits<uint32_t>::max(), "GGUF file '", path(), "': key '", key, "' value ", x,
                 " does not fit in u32");
  return static_cast<uint32_t>(x);
}

int64_t GgufFile::get_i64(const std::string& key) const {
  const GgufValue& v = require(key, "an integer");
  CONVEYOR_CHECK(v.is_integer(), "GGUF file '", path(), "': key '", key, "' is ", v.type_text(), ", wanted an integer");
  CONVEYOR_CHECK(v.type != GgufValueType::kU64 || v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "GGUF file '", path(), "': key '", key, "' value ", v.u, " does not fit in i64");
  return v.i;
}

float GgufFile::get_f32(const std::string& key) const {
  const GgufValue& v = require(key, "f32");
  CONVEYOR_CHECK(v.type == GgufValueType::kF32 || v.type == GgufValueType::kF64, "GGUF file '", path(), "': key '", key,
                 "' is ", v.type_text(), ", wanted f32");
  return static_cast<float>(v.f);
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = require(key, "bool");
  CONVEYOR_CHECK(v.type == GgufValueType::kBool, "GGUF file '", path(), "': key '", key, "' is ", v.type_text(),
                 ", wanted bool");
  return v.b;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = require(key, "array[string]");
  CONVEYOR_CHECK(v.type == GgufValueType::kArray && v.elem_type == GgufValueType::kString, "GGUF file '", path(),
                 "': key '", key, "' is ", v.type_text(), ", wanted array[string]");
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(e.s);
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const GgufValue& v = require(key, "array[i32]");
  CONVEYOR_CHECK(v.type == GgufValueType::kArray && v.elem_type == GgufValueType::kI32, "GGUF file '", path(),
                 "': key '", key, "' is ", v.type_text(), ", wanted array[i32]");
  std::vector<int32_t> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(static_cast<int32_t>(e.i));
  return out;
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& v = require(key, "array[f32]");
  CONVEYOR_CHECK(v.type == GgufValueType::kArray && v.elem_type == GgufValueType::kF32, "GGUF file '", path(),
                 "': key '", key, "' is ", v.type_text(), ", wanted array[f32]");
  std::vector<float> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(static_cast<float>(e.f));
  return out;
}

// --- tensor types --------------------------------------------------------------------------------

const GgmlTypeTraits* ggml_type_traits(uint32_t type_id) {
  struct Entry {
    uint32_t id;
    GgmlTypeTraits traits;
  };
  static const Entry kTable[] = {
      {0, {"F32", 1, 4}},          {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},     {3, {"Q4_1", 32, 20}},
      {6, {"Q5_0", 32, 22}},       {7, {"Q5_1", 32, 24}},      {8, {"Q8_0", 32, 34}},     {9, {"Q8_1", 32, 40}},
      {10, {"Q2_K", 256, 84}},     {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},  {13, {"Q5_K", 256, 176}},
      {14, {"Q6_K", 256, 210}},    {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
      {18, {"IQ3_XXS", 256, 98}},  {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},  {21, {"IQ3_S", 256, 110}},
      {22, {"IQ2_S", 256, 82}},    {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},        {25, {"I16", 1, 2}},
      {26, {"I32", 1, 4}},         {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},       {29, {"IQ1_M", 256, 56}},
      {30, {"BF16", 1, 2}},        {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},
  };
  for (const auto& e : kTable)
    if (e.id == type_id) return &e.traits;
  return nullptr;
}

const char* ggml_type_name(GgmlType t) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : "?";
}

}  // namespace conveyor
