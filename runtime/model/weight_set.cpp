// WeightSet (see weight_set.h).
#include "runtime/model/weight_set.h"

#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

void WeightSet::add(HostTensor header, WeightFill fill) {
  CONVEYOR_CHECK(header.data.empty(), "internal: weight '", header.name, "' added to a lazy set with data");
  CONVEYOR_CHECK(fill != nullptr, "internal: weight '", header.name, "' added without a fill");
  std::string name = header.name;
  auto [it, fresh] = entries_.emplace(std::move(name), Entry{std::move(header), std::move(fill)});
  CONVEYOR_CHECK(fresh, "internal: weight '", it->first, "' added twice to one weight set");
}

void WeightSet::erase(const std::string& name) {
  CONVEYOR_CHECK(entries_.erase(name) == 1, "internal: weight '", name, "' erased but not held");
}

std::vector<std::string> WeightSet::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

const WeightSet::Entry& WeightSet::entry(const std::string& name) const {
  auto it = entries_.find(name);
  CONVEYOR_CHECK(it != entries_.end(), "weight '", name, "' is not held by this rank");
  return it->second;
}

const HostTensor& WeightSet::header(const std::string& name) const { return entry(name).header; }

void WeightSet::fill(const std::string& name, float* out) const {
  const Entry& e = entry(name);
  e.fill(e.header, out);
}

HostTensor WeightSet::materialize(const std::string& name) const {
  const Entry& e = entry(name);
  HostTensor t = e.header;
  t.data.resize(static_cast<size_t>(t.numel()));
  e.fill(e.header, t.data.data());
  return t;
}

std::map<std::string, HostTensor> WeightSet::materialize_all() const {
  std::map<std::string, HostTensor> out;
  for (const auto& [name, e] : entries_) out.emplace(name, materialize(name));
  return out;
}

size_t WeightSet::bytes() const {
  size_t b = 0;
  for (const auto& [name, e] : entries_) b += static_cast<size_t>(e.header.numel()) * sizeof(float);
  return b;
}

}  // namespace conveyor
