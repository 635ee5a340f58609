// The compute device of a rank: the host (CPU backend) or one CUDA GPU. Owns allocation, copies and
// streams, so transport and benchmark code is written once for both backends.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/core/device_buffer.h"  // DeviceBuffer(&device, bytes) owns Device memory
#include "runtime/dist/communicator.h"

namespace conveyor {

enum class Backend { kCpu, kCuda };
const char* backend_name(Backend b);

struct DeviceInfo {
  Backend backend = Backend::kCpu;
  int index = -1;  // CUDA ordinal, -1 for the host
  std::string name;
  std::string uuid;  // the physical GPU ("GPU-..."), whatever CUDA_VISIBLE_DEVICES numbers it; "" on the host
  size_t total_memory = 0;
  size_t free_memory = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceInfo info() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // throws with the size and free memory on failure
  virtual void release(void* p) = 0;
  // The copies and the fill are complete when they return, as seen from every stream of the device.
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
// "host/uuid" of this process's current CUDA device, or "host/cpu": equal for two ranks exactly when
// they compute on the same device.
std::string device_identity(Backend backend);
// local_rank picks the GPU (local_rank % device count).
std::unique_ptr<Device> make_device(Backend backend, int local_rank);

}  // namespace conveyor
