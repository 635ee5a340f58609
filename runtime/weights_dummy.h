// Dummy weights for `--load-format dummy`: deterministic values from a seed and the weight's
// internal name, computed per element of the FULL tensor by a counter-based hash, so any layout
// (pp x tp) sees the same value for the same element and a 70B shape needs no checkpoint.
// Scale: linear weights, embedding and biases ~ N(0, 0.02^2); norm weights 1 + N(0, 0.02^2).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/model_spec.h"
#include "runtime/weight_loader.h"
#include "runtime/weights_layout.h"

namespace conveyor {

constexpr float kDummyStddev = 0.02f;

inline uint64_t dummy_mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key of one tensor: the seed mixed with an FNV-1a hash of its internal name.
uint64_t dummy_tensor_key(uint64_t seed, const std::string& internal_name);

// Standard normal sample for element `index` of the tensor with `key` (Box-Muller on one 64-bit hash).
inline float dummy_normal(uint64_t key, uint64_t index) {
  uint64_t h = dummy_mix(key ^ dummy_mix(index));
  double u1 = (static_cast<double>(h >> 32) + 0.5) / 4294967296.0;
  double u2 = (static_cast<double>(h & 0xffffffffull) + 0.5) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// The share's tensors, same shapes and names as WeightLoader::load_share would give.
WeightSet make_dummy_weights(const ModelSpec& spec, const WeightShare& share, uint64_t seed);

}  // namespace conveyor
