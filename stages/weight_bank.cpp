// WeightBank (see weight_bank.h).
#include "stages/weight_bank.h"

#include <utility>

#include "runtime/error.h"
#include "runtime/strings.h"

namespace conveyor {

HostTensor WeightBank::take_host(const std::string& name) {
  auto it = weights_.tensors.find(name);
  CONVEYOR_CHECK(it != weights_.tensors.end(), "weight '", name, "' is not among the ", weights_.tensors.size(),
                 " weights loaded for this stage (already taken, or not in its share)");
  HostTensor t = std::move(it->second);
  weights_.tensors.erase(it);
  return t;
}

Tensor WeightBank::take(const std::string& name) { return ops_.adopt(take_host(name)); }

Tensor WeightBank::take_concat_rows(const std::string& a, const std::string& b) {
  HostTensor ta = take_host(a);
  HostTensor tb = take_host(b);
  CONVEYOR_CHECK(ta.shape.size() == 2 && tb.shape.size() == 2 && ta.shape[1] == tb.shape[1], "weights '", a,
                 "' and '", b, "' cannot be stacked: both must be 2-D with the same number of columns");
  ta.data.insert(ta.data.end(), tb.data.begin(), tb.data.end());
  ta.shape[0] += tb.shape[0];
  ta.name = a + "+" + b;
  return ops_.adopt(std::move(ta));
}

Tensor WeightBank::take_concat_rows(const std::vector<std::string>& names) {
  HostTensor all = take_host(names.at(0));
  all.name = names[0];
  for (size_t i = 1; i < names.size(); ++i) {
    HostTensor t = take_host(names[i]);
    CONVEYOR_CHECK(t.shape.size() == all.shape.size() && (t.shape.size() == 1 || t.shape[1] == all.shape[1]),
                   "weights '", names[0], "' and '", names[i], "' cannot be stacked");
    all.data.insert(all.data.end(), t.data.begin(), t.data.end());
    all.shape[0] += t.shape[0];
    all.name += "+" + names[i];
  }
  return ops_.adopt(std::move(all));
}

void WeightBank::finish() const {
  if (weights_.tensors.empty()) return;
  std::vector<std::string> left;
  for (const auto& [name, t] : weights_.tensors) left.push_back(name);
  CONVEYOR_THROW("internal: weights loaded but not used by any layer: ", join(left, ", "));
}

}  // namespace conveyor
