// Times launches on one stream between two CUDA events made once: the runners' first-use races
// (GemmRunner, Fp8GemmRunner), warm or with the L2 flushed before each call. Waits for the stream, so never
// while it is being captured.
#pragma once

#include <cuda_runtime.h>

#include <limits>
#include <utility>

#include "kernels/cuda/elementwise.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"

namespace conveyor {

// A region of the L2's size for LaunchTimer::us_cold, taken at the process's first such race and kept (cold_l2():
// races later, in a decode step that meets a new shape, allocate nothing; none where it cannot be had: the races
// then time warm; it comes out of the fixed margin of gpu_reserve.h). The decode shapes' races use it (GemmRunner,
// Fp8GemmRunner): run after run the same weights would sit in the L2 (50 MB on an H100 holds an 8B model's o or
// q|k|v), and an H100 raced bf16 o (n = k = 4096) to cuBLASLt in one process (23.0 us in the step) and to the
// gemv (16.7 us) in another (benchmarks/results/nvidia-h100/2026-12-07-r15). Off unless CONVEYOR_COLD_GEMM_TUNE=1
// (read once): on an H100 batch 1 bf16 was 0.3% slower with it (benchmarks/results/nvidia-h100/2026-12-07-r16),
// when the flush was a write (cudaMemsetAsync). That left the L2 dirty, so the timed run's reads shared DRAM with
// its write-back (o: 20.0 us cold, 10.0 warm, where its bytes take 10 us). The flush now reads a region of zeros
// (read_through_l2_cuda), leaving clean lines; not yet run on a GPU.
class ColdL2 {
 public:
  ColdL2() {
    static const bool on = env_switch_opt_in("CONVEYOR_COLD_GEMM_TUNE");
    int device = 0, l2 = 0;
    if (!on || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess || l2 <= 0)
      return;
    const size_t bytes = static_cast<size_t>(l2) / 16 * 16;  // read_through_l2_cuda reads 16-byte packs
    if (cudaMalloc(&p_, bytes) != cudaSuccess || cudaMemset(p_, 0, bytes) != cudaSuccess) {
      cudaGetLastError();  // out of memory: time warm
      if (p_ != nullptr) cudaFree(p_);
      p_ = nullptr;
      return;
    }
    bytes_ = bytes;
  }
  ~ColdL2() {
    if (p_ != nullptr) cudaFree(p_);
  }
  ColdL2(const ColdL2&) = delete;
  ColdL2& operator=(const ColdL2&) = delete;
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// The process's region (made on first use).
inline const ColdL2& cold_l2() {
  static const ColdL2 region;
  return region;
}

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

  // Microseconds per call as us() gives them, each call timed alone after `cold`'s region was read through the L2
  // on the stream (as large as the L2: the call meets its operands in DRAM, as a decode step meets each layer's
  // weights after the layers before went through the L2). Without a region, us().
  template <typename Launch>
  float us_cold(Launch&& launch, int runs, cudaStream_t stream, const ColdL2& cold) {
    void* flush = cold.data();
    const size_t flush_bytes = cold.bytes();
    if (flush == nullptr) return us(launch, runs, stream);
    if (!launch()) return std::numeric_limits<float>::infinity();
    float total = 0.f;
    for (int r = 0; r < runs; ++r) {
      read_through_l2_cuda(flush, static_cast<int64_t>(flush_bytes), stream);
      CONVEYOR_CUDA_CHECK(cudaEventRecord(start_, stream));
      const bool ok = launch();
      CONVEYOR_CUDA_CHECK(cudaEventRecord(stop_, stream));
      CONVEYOR_CUDA_CHECK(cudaEventSynchronize(stop_));
      if (!ok) return std::numeric_limits<float>::infinity();
      float ms = 0.f;
      CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      total += ms;
    }
    return 1000.f * total / runs;
  }

  // us_cold with `cold`'s region where one is given, else us().
  template <typename Launch>
  float us_where(Launch&& launch, int runs, cudaStream_t stream, const ColdL2* cold) {
    return cold != nullptr ? us_cold(launch, runs, stream, *cold) : us(launch, runs, stream);
  }

  // The fastest of n candidates, launch(i) enqueuing candidate i and returning whether it could, each timed by
  // us_where: {its index, its microseconds}, or {-1, infinity} when none ran (the runners' first-use races).
  template <typename Launch>
  std::pair<int, float> fastest(int n, Launch&& launch, int runs, cudaStream_t stream, const ColdL2* cold) {
    std::pair<int, float> best{-1, std::numeric_limits<float>::infinity()};
    for (int i = 0; i < n; ++i) {
      const float t = us_where([&] { return launch(i); }, runs, stream, cold);
      if (t < best.second) best = {i, t};
    }
    return best;
  }

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
