// WeightSource: the tensors of a checkpoint in its own naming (HF safetensors, single or sharded, or
// GGUF), read as fp32 one element range at a time, so a rank converts only the slices it holds.
// Ranges are flat, row-major (for GGUF: storage order, which is the same thing).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace conveyor {

struct SourceTensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major
  std::string dtype;           // "BF16", "Q4_1", ...
  uint64_t nbytes = 0;         // bytes in the file
  std::string file;            // which file holds it
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

enum class SourceFormat { kSafetensors, kGguf };

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual SourceFormat format() const = 0;
  virtual const std::string& path() const = 0;
  // Sorted by name.
  virtual const std::vector<SourceTensor>& tensors() const = 0;
  // Converts elements [begin, end) of tensor `name` (row-major flat index) to fp32 in out.
  virtual void read_range(const std::string& name, int64_t begin, int64_t end, float* out) const = 0;
  // Throws, naming file and tensor, unless read_range can convert tensor `name` (its dtype is one
  // conveyor decodes); cheap, reads no data, so loaders check up front before a long lazy load.
  virtual void check_readable(const std::string& name) const { (void)name; }

  const SourceTensor* find(const std::string& name) const;
  const SourceTensor& at(const std::string& name) const;  // throws naming the tensor, with a suggestion
};

// Opens an HF directory (model.safetensors.index.json, or model.safetensors), one .safetensors file,
// or a .gguf file.
std::unique_ptr<WeightSource> open_weight_source(const std::string& path);
std::unique_ptr<WeightSource> open_safetensors_source(const std::string& path);
std::unique_ptr<WeightSource> open_gguf_source(const std::string& path);

}  // namespace conveyor
