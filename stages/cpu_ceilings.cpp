// CPU ceilings (see cpu_ceilings.h). Best of a few passes: the machine may be shared, and the best
// pass is the nearest to what the hardware can do.
#include "stages/cpu_ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace conveyor {
namespace {

constexpr int64_t kTriadFloats = int64_t{1} << 24;  // 64 MiB per array, past any L3
constexpr int kPasses = 3;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double triad_bandwidth() {
  std::vector<float> a(kTriadFloats), b(kTriadFloats), c(kTriadFloats);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < kTriadFloats; ++i) {  // first touch by the threads that use the pages
    b[i] = static_cast<float>(i % 7);
    c[i] = static_cast<float>(i % 5);
  }
  double best = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kTriadFloats; ++i) a[i] = b[i] + 0.5f * c[i];
    best = std::min(best, seconds_since(t0));
  }
  volatile float sink = a[static_cast<size_t>(kTriadFloats / 3)];  // keeps the loop from being dropped
  (void)sink;
  return 3.0 * sizeof(float) * static_cast<double>(kTriadFloats) / best;
}

double matmul_flops() {
  const int tokens = 128, n = 1024, k = 1024;
  std::vector<float> x(static_cast<size_t>(tokens) * k), w(static_cast<size_t>(n) * k), y(static_cast<size_t>(tokens) * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) * 0.01f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 11) * 0.01f;
  double best = 1e30;
  for (int pass = 0; pass < kPasses + 1; ++pass) {  // the first pass warms caches and threads
    const auto t0 = std::chrono::steady_clock::now();
    matmul_ref(y.data(), x.data(), w.data(), nullptr, tokens, n, k);
    if (pass > 0) best = std::min(best, seconds_since(t0));
  }
  return 2.0 * tokens * n * k / best;
}

}  // namespace

CpuCeilings measure_cpu_ceilings() { return {triad_bandwidth(), matmul_flops()}; }

}  // namespace conveyor
