// Times launches on one stream between two CUDA events made once: the runners' first-use races
// (GemmRunner, Fp8GemmRunner). Waits for the stream, so never while it is being captured.
#pragma once

#include <cuda_runtime.h>

#include <limits>

#include "runtime/core/cuda_check.h"

namespace conveyor {

class LaunchTimer {
 public:
  LaunchTimer() {
    CONVEYOR_CUDA_CHECK(cudaEventCreate(&start_));
    CONVEYOR_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~LaunchTimer() {  // must not throw: errors are ignored (the context may already be gone)
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (start_ != nullptr) cudaEventDestroy(start_);
  }
  LaunchTimer(const LaunchTimer&) = delete;
  LaunchTimer& operator=(const LaunchTimer&) = delete;

  // Microseconds per call of launch() (which enqueues on `stream` and returns whether it could) over
  // `runs` calls after one untimed call; infinity when a call fails.
  template <typename Launch>
  float us(Launch&& launch, int runs, cudaStream_t stream) {
    if (!launch()) return std::numeric_limits<float>::infinity();
    CONVEYOR_CUDA_CHECK(cudaEventRecord(start_, stream));
    bool ok = true;
    for (int r = 0; r < runs && ok; ++r) ok = launch();
    CONVEYOR_CUDA_CHECK(cudaEventRecord(stop_, stream));
    CONVEYOR_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ok ? 1000.f * ms / runs : std::numeric_limits<float>::infinity();
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace conveyor
