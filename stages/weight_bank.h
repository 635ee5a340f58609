// WeightBank: a rank's lazy weights (WeightSet) handed to the backend one tensor at a time, by
// internal name. take() reads a tensor only then (checkpoint, GGUF dequant or dummy hash), adopts it
// and drops the host copy, so host memory for weights peaks at one tensor (one concatenation for
// take_concat_rows), not the share. finish() checks nothing was left unused (a wiring bug otherwise).
#pragma once

#include <string>
#include <vector>

#include "runtime/model/weight_set.h"
#include "stages/backend.h"

namespace conveyor {

class WeightBank {
 public:
  WeightBank(WeightSet&& weights, Ops& ops) : weights_(std::move(weights)), ops_(ops) {}

  bool has(const std::string& name) const { return weights_.has(name); }
  // Name, shapes and split of a weight not yet taken; no data (nothing is read).
  const HostTensor& peek(const std::string& name) const;
  Tensor take(const std::string& name);
  // Concatenation of weights along their first dimension, read straight into one buffer, for one
  // GEMM (gate|up, q|k|v): all 2-D with equal columns ([sum rows, cols]) or all 1-D ([sum n]).
  Tensor take_concat_rows(const std::vector<std::string>& names);
  Tensor take_concat_rows(const std::string& a, const std::string& b) { return take_concat_rows({a, b}); }
  void finish() const;  // throws naming any weight no layer took

  // fp32 bytes of the weights not yet taken (none of them is held in host memory).
  size_t pending_bytes() const { return weights_.bytes(); }

 private:
  WeightSet weights_;
  Ops& ops_;
};

}  // namespace conveyor
