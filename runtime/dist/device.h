// The compute device of a rank: the host (CPU backend) or one CUDA GPU. Owns allocation, copies and
// streams, so transport and benchmark code is written once for both backends.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/dist/communicator.h"

namespace conveyor {

enum class Backend { kCpu, kCuda };
const char* backend_name(Backend b);

struct DeviceInfo {
  Backend backend = Backend::kCpu;
  int index = -1;  // CUDA ordinal, -1 for the host
  std::string name;
  size_t total_memory = 0;
  size_t free_memory = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceInfo info() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // throws with the size and free memory on failure
  virtual void release(void* p) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_bytes(void* dst, int value, size_t bytes) = 0;
  virtual Stream create_stream() = 0;  // nullptr on the host
  virtual void destroy_stream(Stream s) = 0;
  virtual void synchronize(Stream s) = 0;
};

// "auto" is cuda when conveyor was built with CUDA and a GPU is visible, else cpu.
Backend resolve_backend(const std::string& configured);
int cuda_device_count();  // 0 without CUDA
// local_rank picks the GPU (local_rank % device count).
std::unique_ptr<Device> make_device(Backend backend, int local_rank);

// A device allocation released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device* dev, size_t bytes) : dev_(dev), bytes_(bytes), ptr_(bytes ? dev->allocate(bytes) : nullptr) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_;
      bytes_ = o.bytes_;
      ptr_ = o.ptr_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void reset() {
    if (ptr_) dev_->release(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  Device* dev_ = nullptr;
  size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

}  // namespace conveyor
