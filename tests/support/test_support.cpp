// Test helpers (see test_support.h).
#include "tests/support/test_support.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace conveyor::testing {

std::string source_dir() {
  const char* env = std::getenv("CONVEYOR_SOURCE_DIR");
  return env && *env ? env : CONVEYOR_SOURCE_DIR;
}

std::string data_path(const std::string& rel) { return source_dir() + "/tests/data/" + rel; }

std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("conveyor_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::string compare_all(const std::vector<float>& got, const std::vector<float>& want, float atol, float rtol) {
  if (got.size() != want.size())
    return "size mismatch: got " + std::to_string(got.size()) + ", want " + std::to_string(want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {  // NaN counts as a mismatch
      if (bad == 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << bad << " of " << got.size() << " elements differ; first at index " << first << ": got " << got[first]
     << ", want " << want[first] << " (atol " << atol << ", rtol " << rtol << ")";
  return os.str();
}

bool gpu_required() {
  const char* env = std::getenv("CONVEYOR_REQUIRE_GPU");
  return env && std::string(env) == "1";
}

}  // namespace conveyor::testing

#ifdef CONVEYOR_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include "tests/support/gpu_presence.h"

namespace conveyor::testing {
int gpu_count() {
#ifdef CONVEYOR_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}
}  // namespace conveyor::testing
