// One CUDA GPU as a Device (see runtime/dist/device.h).
#include <memory>
#include <string>

#include "runtime/core/cuda_check.h"
#include "runtime/core/strings.h"
#include "runtime/dist/device.h"

namespace conveyor {

int cuda_device_count_impl() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {

std::string uuid_of(int ordinal) {
  cudaDeviceProp prop{};
  CONVEYOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    CONVEYOR_CUDA_CHECK(cudaSetDevice(ordinal_));
    set_process_identity(process_identity().rank, ordinal_);
  }
  DeviceInfo info() const override {
    cudaDeviceProp prop{};
    CONVEYOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal_));
    DeviceInfo d;
    d.backend = Backend::kCuda;
    d.index = ordinal_;
    d.name = prop.name;
    d.uuid = uuid_of(ordinal_);
    CONVEYOR_CUDA_CHECK(cudaMemGetInfo(&d.free_memory, &d.total_memory));
    return d;
  }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      CONVEYOR_THROW("cudaMalloc of ", format_bytes(static_cast<double>(bytes)), " failed: ",
                     cudaGetErrorString(rc), " (", format_bytes(static_cast<double>(free_b)), " free of ",
                     format_bytes(static_cast<double>(total_b)), ")");
    }
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  // cudaMemcpy from pageable memory returns once the bytes are staged, and cudaMemset may return before
  // it ran: both are ordered only with the legacy stream, and every conveyor stream is non-blocking. So
  // each waits for the legacy stream, which makes the Device contract hold (done on every stream).
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    CONVEYOR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    CONVEYOR_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void fill_bytes(void* dst, int value, size_t bytes) override {
    CONVEYOR_CUDA_CHECK(cudaMemset(dst, value, bytes));
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  Stream create_stream() override {
    cudaStream_t s = nullptr;
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void destroy_stream(Stream s) override {
    if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
  void synchronize(Stream s) override { CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(s))); }

 private:
  int ordinal_;
};

}  // namespace

std::string current_cuda_uuid() {
  int ordinal = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&ordinal));
  return uuid_of(ordinal);
}

std::unique_ptr<Device> make_cuda_device(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace conveyor
