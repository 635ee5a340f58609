// WeightSet: the tensors of one rank's share, by internal name, held lazily. Each entry is a header
// (name, shapes, split; data always empty) and a fill that converts that one tensor (safetensors
// read, GGUF dequant, dummy hash) when asked, so host memory for weights is bounded by what the
// consumer materialises at once, not by the share. Invariant: the set itself holds no tensor data;
// a fill owns (shares) whatever it reads from, so a set may outlive its loader.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/model/host_tensor.h"

namespace conveyor {

// Writes header.numel() floats of the tensor `header` describes into out, row-major.
using WeightFill = std::function<void(const HostTensor& header, float* out)>;

class WeightSet {
 public:
  // header.data must be empty; a duplicate name is an internal error.
  void add(HostTensor header, WeightFill fill);
  void erase(const std::string& name);

  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  std::vector<std::string> names() const;  // sorted

  // Name, shapes and split of a weight, without data; throws naming the weight when absent.
  const HostTensor& header(const std::string& name) const;
  // Converts `name` into out (header(name).numel() floats). The entry stays in the set.
  void fill(const std::string& name, float* out) const;
  // The header with its data read now. The entry stays in the set.
  HostTensor materialize(const std::string& name) const;
  // Every tensor read now: for tests and tools on small models, since it holds the whole share.
  std::map<std::string, HostTensor> materialize_all() const;

  // fp32 bytes of all tensors once materialised; the set itself holds none of them.
  size_t bytes() const;

 private:
  struct Entry {
    HostTensor header;
    WeightFill fill;
  };
  const Entry& entry(const std::string& name) const;

  std::map<std::string, Entry> entries_;
};

}  // namespace conveyor
