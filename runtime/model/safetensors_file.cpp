// safetensors parsing and validation (see safetensors_file.h). The header is parsed with
// nlohmann::json; every number is range-checked before it is used as an offset or a size.
#include "runtime/model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "kernels/cpu/fp8.h"
#include "kernels/dtype.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {
namespace {

using json = nlohmann::json;

const std::vector<std::pair<std::string, SafetensorsDType>>& dtype_table() {
  static const std::vector<std::pair<std::string, SafetensorsDType>> t = {
      {"F32", SafetensorsDType::kF32}, {"F16", SafetensorsDType::kF16},
      {"BF16", SafetensorsDType::kBF16}, {"F8_E4M3", SafetensorsDType::kF8E4M3}};
  return t;
}

SafetensorsDType parse_dtype(const std::string& s, const std::string& file, const std::string& tensor) {
  std::vector<std::string> names;
  for (const auto& [n, t] : dtype_table()) {
    if (n == s) return t;
    names.push_back(n);
  }
  CONVEYOR_THROW("safetensors file '", file, "': tensor '", tensor, "' has dtype '", s,
                 "', which conveyor does not load (supported: ", join(names, ", "),
                 "); convert the checkpoint to bf16/f16/f32");
}

// Unsigned non-negative integer from JSON, or a clear error.
uint64_t json_u64(const json& v, const std::string& file, const std::string& tensor, const char* field) {
  CONVEYOR_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0),
                 "safetensors file '", file, "': tensor '", tensor, "' field ", field,
                 " must hold non-negative integers, found ", v.dump());
  return v.get<uint64_t>();
}

SafetensorsTensor parse_tensor(const std::string& name, const json& info, const std::string& file) {
  CONVEYOR_CHECK(info.is_object(), "safetensors file '", file, "': entry for tensor '", name,
                 "' must be an object with dtype, shape and data_offsets");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    CONVEYOR_CHECK(info.contains(field), "safetensors file '", file, "': tensor '", name, "' lacks '", field, "'");
  SafetensorsTensor t;
  t.name = name;
  CONVEYOR_CHECK(info["dtype"].is_string(), "safetensors file '", file, "': tensor '", name, "' dtype is not a string");
  t.dtype = parse_dtype(info["dtype"].get<std::string>(), file, name);
  const json& shape = info["shape"];
  CONVEYOR_CHECK(shape.is_array(), "safetensors file '", file, "': tensor '", name, "' shape is not an array");
  uint64_t numel = 1;
  for (const json& d : shape) {
    uint64_t dim = json_u64(d, file, name, "shape");
    CONVEYOR_CHECK(dim <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "safetensors file '", file,
                   "': tensor '", name, "' dimension ", dim, " is too large");
    CONVEYOR_CHECK(dim == 0 || numel <= std::numeric_limits<uint64_t>::max() / dim, "safetensors file '", file,
                   "': tensor '", name, "' shape ", shape.dump(), " overflows 64 bits");
    numel *= dim;
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  const json& off = info["data_offsets"];
  CONVEYOR_CHECK(off.is_array() && off.size() == 2, "safetensors file '", file, "': tensor '", name,
                 "' data_offsets must be [begin, end], found ", off.dump());
  uint64_t begin = json_u64(off[0], file, name, "data_offsets");
  uint64_t end = json_u64(off[1], file, name, "data_offsets");
  CONVEYOR_CHECK(begin <= end, "safetensors file '", file, "': tensor '", name, "' data_offsets [", begin, ", ", end,
                 "] end before they begin");
  uint64_t esize = safetensors_dtype_size(t.dtype);
  CONVEYOR_CHECK(numel <= std::numeric_limits<uint64_t>::max() / esize, "safetensors file '", file, "': tensor '",
                 name, "' byte size overflows 64 bits");
  CONVEYOR_CHECK(end - begin == numel * esize, "safetensors file '", file, "': tensor '", name, "' shape ",
                 shape.dump(), " x ", safetensors_dtype_name(t.dtype), " needs ", numel * esize,
                 " bytes but data_offsets [", begin, ", ", end, "] hold ", end - begin, "; the file is corrupt");
  t.begin = static_cast<size_t>(begin);
  t.end = static_cast<size_t>(end);
  return t;
}

// Tensors must tile the data area exactly: sorted by begin, each starts where the previous ended.
void check_layout(std::vector<SafetensorsTensor> tensors, size_t data_start, size_t file_size, const std::string& file) {
  const size_t data_size = file_size - data_start;
  std::sort(tensors.begin(), tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t expect = 0;
  for (const auto& t : tensors) {
    CONVEYOR_CHECK(t.begin == expect, "safetensors file '", file, "': tensor '", t.name, "' begins at data offset ",
                   t.begin, " but the previous tensor ends at ", expect,
                   " (tensors must be contiguous and non-overlapping); the file is corrupt");
    expect = t.end;
  }
  CONVEYOR_CHECK(expect <= data_size, "safetensors file '", file, "' is ", file_size, " bytes but its header describes ",
                 data_start + expect, " bytes; the file is truncated: download it again");
  CONVEYOR_CHECK(expect == data_size, "safetensors file '", file, "': tensors cover ", expect,
                 " bytes but the data area holds ", data_size, " bytes; the file is truncated or corrupt");
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDType t) {
  for (const auto& [n, v] : dtype_table())
    if (v == t) return n.c_str();
  return "?";
}

size_t safetensors_dtype_size(SafetensorsDType t) {
  switch (t) {
    case SafetensorsDType::kF32: return 4;
    case SafetensorsDType::kF16:
    case SafetensorsDType::kBF16: return 2;
    case SafetensorsDType::kF8E4M3: return 1;
  }
  return 0;
}

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& name) {
  CONVEYOR_CHECK(size >= 8, "safetensors file '", name, "' is ", size,
                 " bytes, shorter than the 8-byte header length; it is not a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  CONVEYOR_CHECK(n <= kSafetensorsMaxHeader, "safetensors file '", name, "': header length ", n,
                 " exceeds the 100 MB limit; the file is corrupt or not safetensors");
  CONVEYOR_CHECK(n <= size - 8, "safetensors file '", name, "': header length ", n, " runs past the end of the file (",
                 size, " bytes); the file is truncated");
  std::string text(reinterpret_cast<const char*>(data + 8), static_cast<size_t>(n));
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    CONVEYOR_THROW("safetensors file '", name, "': header is not valid JSON: ", e.what());
  }
  CONVEYOR_CHECK(header.is_object(), "safetensors file '", name, "': header must be a JSON object, found ",
                 header.type_name());
  SafetensorsHeader out;
  out.data_start = 8 + static_cast<size_t>(n);
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      CONVEYOR_CHECK(it->is_object(), "safetensors file '", name, "': __metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        CONVEYOR_CHECK(m->is_string(), "safetensors file '", name, "': __metadata__ value for '", m.key(),
                       "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(parse_tensor(it.key(), *it, name));
  }
  check_layout(out.tensors, out.data_start, size, name);
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  header_ = parse_safetensors(file_.data(), file_.size(), path);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(header_.tensors.begin(), header_.tensors.end(), name,
                             [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != header_.tensors.end() && it->name == name ? &*it : nullptr;
}


void safetensors_to_f32(SafetensorsDType dtype, const uint8_t* src, size_t n, float* dst) {
  if (n == 0) return;  // empty tensors: dst may be null, and memcpy(null, p, 0) is undefined
  switch (dtype) {
    case SafetensorsDType::kF32: std::memcpy(dst, src, n * 4); return;
    case SafetensorsDType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case SafetensorsDType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case SafetensorsDType::kF8E4M3:
      for (size_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_float(src[i]);
      return;
  }
}

}  // namespace conveyor
