// HostTensor: an fp32 tensor in host memory, row-major, as the weight loader hands it to the model.
// A tensor may be one rank's share of a larger one: full_shape, split_dim and split_begin say which
// slice it is, so shares can be checked and concatenated. Invariant: data.size() == numel().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

struct HostTensor {
  std::string name;                 // internal weight name, e.g. "layers.3.q_proj"
  std::vector<int64_t> shape;       // this share, row-major
  std::vector<int64_t> full_shape;  // the whole tensor before splitting
  int split_dim = -1;               // -1: not split (replicated)
  int64_t split_begin = 0;          // first index along split_dim held here
  std::vector<float> data;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return data.size() * sizeof(float); }
};

}  // namespace conveyor
