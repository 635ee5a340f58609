// The host as a device (CPU backend), and backend selection.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/dist/device.h"

namespace conveyor {

const char* backend_name(Backend b) { return b == Backend::kCuda ? "cuda" : "cpu"; }

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (starts_with(line, "model name")) return trim(line.substr(line.find(':') + 1));
  return "cpu";
}

class CpuDevice : public Device {
 public:
  DeviceInfo info() const override {
    DeviceInfo d;
    d.backend = Backend::kCpu;
    d.name = cpu_model_name() + " (" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores)";
    d.total_memory = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    d.free_memory = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    return d;
  }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, bytes) != 0 || !p)
      CONVEYOR_THROW("host allocation of ", format_bytes(static_cast<double>(bytes)), " failed (",
                     format_bytes(static_cast<double>(info().free_memory)), " free)");
    return p;
  }
  void release(void* p) override { std::free(p); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_bytes(void* dst, int value, size_t bytes) override { std::memset(dst, value, bytes); }
  Stream create_stream() override { return nullptr; }
  void destroy_stream(Stream) override {}
  void synchronize(Stream) override {}
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

#ifdef CONVEYOR_WITH_CUDA
std::unique_ptr<Device> make_cuda_device(int ordinal);  // runtime/dist/cuda/cuda_device.cpp
int cuda_device_count_impl();
std::string current_cuda_uuid();
#endif

int cuda_device_count() {
#ifdef CONVEYOR_WITH_CUDA
  return cuda_device_count_impl();
#else
  return 0;
#endif
}

Backend resolve_backend(const std::string& configured) {
  if (configured == "cpu") return Backend::kCpu;
  if (configured == "cuda") {
#ifndef CONVEYOR_WITH_CUDA
    CONVEYOR_THROW("runtime.backend is 'cuda' but this conveyor was built without CUDA (CONVEYOR_WITH_CUDA=OFF)");
#endif
    CONVEYOR_CHECK(cuda_device_count() > 0, "runtime.backend is 'cuda' but no CUDA device is visible "
                                            "(CUDA_VISIBLE_DEVICES=",
                   std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "<unset>", ")");
    return Backend::kCuda;
  }
  return cuda_device_count() > 0 ? Backend::kCuda : Backend::kCpu;
}

std::string device_identity(Backend backend) {
  const std::string host = process_identity().host;
#ifdef CONVEYOR_WITH_CUDA
  if (backend == Backend::kCuda) return host + "/" + current_cuda_uuid();
#endif
  (void)backend;
  return host + "/cpu";
}

std::unique_ptr<Device> make_device(Backend backend, int local_rank) {
  if (backend == Backend::kCpu) return make_cpu_device();
#ifdef CONVEYOR_WITH_CUDA
  int n = cuda_device_count();
  CONVEYOR_CHECK(n > 0, "no CUDA device visible for local rank ", local_rank);
  return make_cuda_device(local_rank % n);
#else
  CONVEYOR_THROW("CUDA backend requested in a build without CUDA");
#endif
}

}  // namespace conveyor
