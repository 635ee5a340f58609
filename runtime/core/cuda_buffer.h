// CudaBuffer: a DeviceBuffer (runtime/core/device_buffer.h, the one owner of device memory) whose
// memory comes from cudaMalloc and goes back with cudaFree, for code that has no Device at hand:
// kernels' callers, the CUDA stage, tests and benchmarks. It adds only the allocation, its error
// (size, purpose, free memory) and host copies for tests.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/core/cuda_check.h"
#include "runtime/core/device_buffer.h"
#include "runtime/core/strings.h"

namespace conveyor {

class CudaBuffer : public DeviceBuffer {
 public:
  CudaBuffer() = default;
  // what: the purpose, named in the error when the allocation fails.
  explicit CudaBuffer(size_t bytes, const char* what = "a device buffer")
      : DeviceBuffer(cuda_allocate(bytes, what), bytes, &cuda_release, nullptr) {}

  // A buffer holding a copy of `host` (synchronous; for tests and benchmarks).
  template <typename T>
  static CudaBuffer from(const std::vector<T>& host) {
    CudaBuffer b(host.size() * sizeof(T));
    if (!host.empty()) CONVEYOR_CUDA_CHECK(cudaMemcpy(b.data(), host.data(), b.bytes(), cudaMemcpyHostToDevice));
    return b;
  }
  // The whole buffer as host values, after the device has finished all work.
  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> out(bytes() / sizeof(T));
    CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
    if (!out.empty()) CONVEYOR_CUDA_CHECK(cudaMemcpy(out.data(), data(), out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  static void* cuda_allocate(size_t bytes, const char* what) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc != cudaSuccess) {
      cudaGetLastError();  // clear the error so that later checks report their own
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      CONVEYOR_THROW("cudaMalloc of ", format_bytes(static_cast<double>(bytes)), " for ", what, " failed: ",
                     cudaGetErrorString(rc), " (", format_bytes(static_cast<double>(free_b)), " free of ",
                     format_bytes(static_cast<double>(total_b)),
                     "); lower cache.gpu_memory_utilization, cache.num_blocks or scheduler.max_num_batched_tokens");
    }
    return p;
  }
  // The context may be gone at exit; an error here is dropped (destructors never throw).
  static void cuda_release(void*, void* p) { cudaFree(p); }
};

// Carves one workspace into 256-byte aligned pieces in order; take() checks the total fits, so a
// sizing function and the code that splits its bytes cannot drift apart unnoticed.
class WorkspaceCarver {
 public:
  WorkspaceCarver(void* base, size_t bytes) : base_(reinterpret_cast<uintptr_t>(base)), bytes_(bytes) {}
  // A carver that only counts: its used() after the same take() calls is the bytes to allocate.
  static WorkspaceCarver sizing() { return WorkspaceCarver(nullptr, SIZE_MAX); }
  static size_t align(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
  template <typename T>
  T* take(size_t count, const char* owner) {
    const size_t need = align(count * sizeof(T));
    CONVEYOR_CHECK(used_ + need <= bytes_, owner, ": the workspace of ", bytes_, " bytes is too small (needs at least ",
                   used_ + need, "); size it with the matching *_workspace_bytes function");
    T* p = reinterpret_cast<T*>(base_ + used_);  // never dereferenced while sizing
    used_ += need;
    return p;
  }
  size_t used() const { return used_; }

  static constexpr size_t kAlign = 256;

 private:
  uintptr_t base_;
  size_t bytes_;
  size_t used_ = 0;
};

}  // namespace conveyor
