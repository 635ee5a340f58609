// Helpers shared by tests: paths to the source tree and test data, seeded random inputs,
// GPU presence policy, and an element-wise comparison that reports the first mismatch.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace conveyor::testing {

std::string source_dir();
std::string data_path(const std::string& rel);  // tests/data/<rel>
std::string temp_dir(const std::string& name);  // a fresh empty directory for this test

// Random values in [lo, hi), never all zero; deterministic for a seed.
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

// Compares every element with |a-b| <= atol + rtol*|b|; returns "" or a message naming the first
// mismatching index and the number of mismatches.
std::string compare_all(const std::vector<float>& got, const std::vector<float>& want, float atol, float rtol);

// True when CONVEYOR_REQUIRE_GPU=1 is set in the environment.
bool gpu_required();

}  // namespace conveyor::testing
