// Timing of enqueued GPU work with CUDA events, shared by `conveyor doctor` and the microbenchmarks:
// warm-up calls, then the median over samples of several back-to-back calls between two events.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "runtime/core/cuda_check.h"

namespace conveyor {

// Median time of one call in microseconds: `warmup` calls, then `samples` samples of `calls`
// back-to-back calls between two events. fn(i) enqueues call number i on `stream`.
template <typename Fn>
double median_us(Fn&& fn, cudaStream_t stream, int samples = 30, int calls = 10, int warmup = 3) {
  cudaEvent_t start, stop;
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&start));
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&stop));
  int call = 0;
  for (int i = 0; i < warmup; ++i) fn(call++);
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    CONVEYOR_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int c = 0; c < calls; ++c) fn(call++);
    CONVEYOR_CUDA_CHECK(cudaEventRecord(stop, stream));
    CONVEYOR_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.f;
    CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(1000.0 * ms / calls);
  }
  CONVEYOR_CUDA_CHECK(cudaEventDestroy(start));
  CONVEYOR_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace conveyor
