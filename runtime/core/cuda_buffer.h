// CudaBuffer: the one owner of raw CUDA device memory (cudaMalloc at construction, cudaFree at
// destruction), for code that has no Device at hand: kernels' callers, the CUDA stage, tests and
// benchmarks. Move-only; an empty buffer (0 bytes) holds no memory. Allocation happens only where a
// CudaBuffer is made, so keeping their construction out of a step keeps the step allocation-free.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/core/cuda_check.h"
#include "runtime/core/strings.h"

namespace conveyor {

class CudaBuffer {
 public:
  CudaBuffer() = default;
  // what: the purpose, named in the error when the allocation fails.
  explicit CudaBuffer(size_t bytes, const char* what = "a device buffer") : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t rc = cudaMalloc(&ptr_, bytes);
    if (rc != cudaSuccess) {
      cudaGetLastError();  // clear the error so that later checks report their own
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      CONVEYOR_THROW("cudaMalloc of ", format_bytes(static_cast<double>(bytes)), " for ", what, " failed: ",
                     cudaGetErrorString(rc), " (", format_bytes(static_cast<double>(free_b)), " free of ",
                     format_bytes(static_cast<double>(total_b)),
                     "); lower cache.gpu_memory_utilization, cache.num_blocks or scheduler.max_num_batched_tokens");
    }
  }
  ~CudaBuffer() { reset(); }
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  // A buffer holding a copy of `host` (synchronous; for tests and benchmarks).
  template <typename T>
  static CudaBuffer from(const std::vector<T>& host) {
    CudaBuffer b(host.size() * sizeof(T));
    if (!host.empty()) CONVEYOR_CUDA_CHECK(cudaMemcpy(b.ptr_, host.data(), b.bytes_, cudaMemcpyHostToDevice));
    return b;
  }
  // The whole buffer as host values, after the device has finished all work.
  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> out(bytes_ / sizeof(T));
    CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
    if (!out.empty()) CONVEYOR_CUDA_CHECK(cudaMemcpy(out.data(), ptr_, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  // Hands the memory to the caller, who frees it with cudaFree (the caching pool's blocks).
  void* release() {
    bytes_ = 0;
    return std::exchange(ptr_, nullptr);
  }
  // Frees now; destructors never throw, so an error here is dropped (the context may be gone).
  void reset() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
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
