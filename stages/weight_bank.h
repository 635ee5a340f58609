// WeightBank: a rank's loaded weights (WeightSet) handed to the backend one tensor at a time, by
// internal name. take() moves a tensor out, so each weight lands in backend memory exactly once and
// the host copy is gone; finish() checks nothing was left unused (a wiring bug otherwise).
#pragma once

#include <string>
#include <vector>

#include "runtime/weight_loader.h"
#include "stages/backend.h"

namespace conveyor {

class WeightBank {
 public:
  WeightBank(WeightSet&& weights, Ops& ops) : weights_(std::move(weights)), ops_(ops) {}

  bool has(const std::string& name) const { return weights_.tensors.count(name) != 0; }
  const HostTensor& peek(const std::string& name) const { return weights_.at(name); }
  Tensor take(const std::string& name);
  // Row-wise concatenation [a; b] of two weights with equal columns (gate|up, for one matmul).
  Tensor take_concat_rows(const std::string& a, const std::string& b);
  Tensor take_concat_rows(const std::vector<std::string>& names);  // TEMP (lazy-weights branch replaces)
  void finish() const;  // throws naming any weight no layer took

 private:
  HostTensor take_host(const std::string& name);

  WeightSet weights_;
  Ops& ops_;
};

}  // namespace conveyor
