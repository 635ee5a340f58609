// Shared by the dense-kernel microbenchmarks (gemm_bench, norm_bench): random device fills, event
// timing (warm-up, then the median of samples of several back-to-back calls) and the report: one
// JSON object per case on stdout, all of them as an array with `--json PATH`. Peaks are the H200's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/cuda/gemm.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/event_timing.h"

namespace conveyor::bench {

constexpr double kPeakGBs = 4280.0;    // H200 HBM3e
constexpr double kPeakTflops = 810.0;  // the project's dense bf16 reference figure

// Uniform values in [-1, 1) from a hash of the index: no host round trip for large weights.
template <typename T>
__global__ void fill_kernel(T* p, int64_t n, uint32_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32) * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float v = static_cast<float>(h & 0xffffffu) / 8388608.f - 1.f;
    if constexpr (sizeof(T) == 4) {
      p[i] = v;
    } else {
      p[i] = T(v);
    }
  }
}

// A device buffer of n elements of dt (bf16, f16 or f32) filled with random values.
class DeviceArray {
 public:
  DeviceArray(int64_t n, DType dt, uint32_t seed) : buffer_(static_cast<size_t>(n) * dtype_size(dt), "a benchmark array") {
    void* ptr_ = buffer_.data();
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536));
    if (dt == DType::kF32) {
      fill_kernel<float><<<blocks, 256>>>(static_cast<float*>(ptr_), n, seed);
    } else if (dt == DType::kBF16) {
      fill_kernel<__nv_bfloat16><<<blocks, 256>>>(static_cast<__nv_bfloat16*>(ptr_), n, seed);
    } else {
      fill_kernel<__half><<<blocks, 256>>>(static_cast<__half*>(ptr_), n, seed);
    }
    CONVEYOR_CUDA_CHECK(cudaGetLastError());
  }
  void* get() const { return buffer_.data(); }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  CudaBuffer buffer_;  // the one device-buffer class (runtime/core/cuda_buffer.h)
};

// A GemmRunner with its own workspace (made first), sized for accumulating shapes up to 8192 x 8192.
class WorkspaceOwner {
 protected:
  explicit WorkspaceOwner(size_t bytes) : workspace_(bytes, "a benchmark GEMM workspace") {}
  CudaBuffer workspace_;
};

class BenchGemm : private WorkspaceOwner, public GemmRunner {
 public:
  BenchGemm()
      : WorkspaceOwner(gemm_workspace_bytes(8192, 8192)), GemmRunner(workspace_.data(), workspace_.bytes()) {}
};

using conveyor::median_us;  // runtime/core/event_timing.h

struct Case {
  std::string name, shape, dtype;
  double time_us = 0, bytes = 0, flops = 0;
};

class Report {
 public:
  // Reads `--json PATH` (the only option shared by all benches); other flags are the caller's.
  Report(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; ++i) {
      if (std::strcmp(argv[i], "--json") == 0) json_path_ = argv[i + 1];
    }
  }
  void add(const Case& c) {
    const double gbs = c.bytes / (c.time_us * 1e3);
    const double tflops = c.flops / (c.time_us * 1e6);
    char buf[640];
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", \"time_us\": %.2f, \"bytes\": %.0f, "
                  "\"GB/s\": %.1f, \"TFLOP/s\": %.2f, \"pct_of_4280_GBs\": %.1f, \"pct_of_810_TFLOPs\": %.1f}",
                  c.name.c_str(), c.shape.c_str(), c.dtype.c_str(), c.time_us, c.bytes, gbs, tflops,
                  100.0 * gbs / kPeakGBs, 100.0 * tflops / kPeakTflops);
    std::printf("%s\n", buf);
    std::fflush(stdout);
    lines_.emplace_back(buf);
  }
  // Writes the JSON array if --json was given; returns the process exit code.
  int finish() const {
    if (json_path_.empty()) return 0;
    FILE* f = std::fopen(json_path_.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path_.c_str());
      return 1;
    }
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < lines_.size(); ++i) std::fprintf(f, "  %s%s\n", lines_[i].c_str(), i + 1 < lines_.size() ? "," : "");
    std::fprintf(f, "]\n");
    std::fclose(f);
    return 0;
  }

 private:
  std::string json_path_;
  std::vector<std::string> lines_;
};

}  // namespace conveyor::bench
