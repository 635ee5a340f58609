// Reader for one .safetensors file: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and [begin, end) inside the data area, then the data area. Validation follows
// the format's reference reader: sane header length, offsets contiguous and covering the data area
// exactly, byte length == product(shape) x dtype size (overflow-checked). Errors name file and tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/mmap_file.h"

namespace conveyor {

enum class SafetensorsDType { kF32, kF16, kBF16, kF8E4M3 };
const char* safetensors_dtype_name(SafetensorsDType t);  // "F32", "BF16", ...
size_t safetensors_dtype_size(SafetensorsDType t);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets relative to the data area
  size_t end = 0;
  size_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  size_t data_start = 0;  // absolute offset of the data area in the file
};

// Parses and validates a whole file image; `name` is used in messages (usually the path).
// Exposed separately so the fuzzer can drive it without touching the file system.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& name);

// Largest header accepted (the reference reader's limit).
constexpr uint64_t kSafetensorsMaxHeader = 100u * 1000u * 1000u;

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsTensor* find(const std::string& name) const;
  const uint8_t* tensor_data(const SafetensorsTensor& t) const { return file_.data() + header_.data_start + t.begin; }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

// Converts n elements of a safetensors dtype to fp32 (exact for every supported dtype).
void safetensors_to_f32(SafetensorsDType dtype, const uint8_t* src, size_t n, float* dst);

}  // namespace conveyor
