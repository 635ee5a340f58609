// DeviceBuffer: the one owner of device memory in conveyor. It takes memory from an allocator with
// allocate(bytes)/release(ptr) (a Device of runtime/dist, which may be the host, or the CUDA runtime
// through CudaBuffer) and gives it back on destruction. Move-only; an empty buffer (0 bytes) holds no
// memory. Allocation happens only where a buffer is made, so keeping that out of a step keeps the step
// allocation-free.
#pragma once

#include <cstddef>
#include <utility>

namespace conveyor {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` from `allocator`, which must outlive the buffer.
  template <typename Allocator>
  DeviceBuffer(Allocator* allocator, size_t bytes)
      : DeviceBuffer(bytes ? allocator->allocate(bytes) : nullptr, bytes, &release_with<Allocator>, allocator) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      free_ = o.free_;
      allocator_ = o.allocator_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  // Hands the memory to the caller, who gives it back to the allocator (the caching pool's blocks).
  void* release() {
    bytes_ = 0;
    return std::exchange(ptr_, nullptr);
  }
  // Gives the memory back now; destructors never throw, so the allocator's release must not either.
  void reset() {
    if (ptr_ != nullptr && free_ != nullptr) free_(allocator_, ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 protected:
  using FreeFn = void (*)(void* allocator, void* ptr);
  DeviceBuffer(void* ptr, size_t bytes, FreeFn free, void* allocator)
      : ptr_(ptr), bytes_(ptr ? bytes : 0), free_(free), allocator_(allocator) {}

 private:
  template <typename Allocator>
  static void release_with(void* allocator, void* ptr) {
    static_cast<Allocator*>(allocator)->release(ptr);
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
  void* allocator_ = nullptr;
};

}  // namespace conveyor
