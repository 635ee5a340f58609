// Dummy weights for `--load-format dummy`: deterministic values from a seed and the weight's
// internal name, computed per element of the FULL tensor by a counter-based hash, so any layout
// (pp x tp) sees the same value for the same element and a 70B shape needs no checkpoint.
// Scale: linear weights, embedding and biases ~ 0.02 * z; norm weights 1 + 0.02 * z, z ~ N(0, 1) approx.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/spec.h"
#include "runtime/model/weight_set.h"
#include "runtime/model/weights_layout.h"

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

// Unit-variance, zero-mean sample for element `index` of the tensor with `key`: the sum of the four
// 16-bit lanes of one 64-bit hash (Irwin-Hall, close to normal, bounded at +-3.46). No
// transcendentals, so it is cheap on CPU and can be reused as-is by a GPU kernel.
inline float dummy_normal(uint64_t key, uint64_t index) {
  uint64_t h = dummy_mix(key ^ dummy_mix(index));
  uint32_t sum = static_cast<uint32_t>((h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48));
  // Each lane is uniform on [0, 65535]: mean 2 * 65535, variance 4 * (65536^2 - 1) / 12.
  constexpr float kScale = 1.0f / 37837.23f;  // 1 / sqrt((65536^2 - 1) / 3)
  return (static_cast<float>(sum) - 131070.0f) * kScale;
}

// Writes the dummy values of the share `t` describes (t.numel() floats) into out: element (i, j) of
// the share is element (split_begin-shifted) of the full tensor, hashed with `key`, plus `offset`.
void fill_dummy(const HostTensor& t, uint64_t key, float offset, float* out);

// The share's tensors, lazy (nothing generated until materialised), same shapes and names as
// WeightLoader::load_share would give.
WeightSet make_dummy_weights(const ModelSpec& spec, const WeightShare& share, uint64_t seed);

}  // namespace conveyor
