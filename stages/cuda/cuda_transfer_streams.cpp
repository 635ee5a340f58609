// CudaTransferStreams (see cuda_transfer_streams.h).
#include "stages/cuda/cuda_transfer_streams.h"

#include "runtime/core/cuda_check.h"

namespace conveyor {

CudaTransferStreams::CudaTransferStreams() {
  CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  CONVEYOR_CUDA_CHECK(cudaEventCreateWithFlags(&order_, cudaEventDisableTiming));
}

CudaTransferStreams::~CudaTransferStreams() {
  cudaStreamSynchronize(comm_);
  for (cudaEvent_t e : marks_) cudaEventDestroy(e);
  cudaEventDestroy(order_);
  cudaStreamDestroy(comm_);
}

void CudaTransferStreams::order_after(cudaStream_t waiter, cudaStream_t signaller) {
  if (waiter == signaller) return;
  CONVEYOR_CUDA_CHECK(cudaEventRecord(order_, signaller));
  CONVEYOR_CUDA_CHECK(cudaStreamWaitEvent(waiter, order_, 0));
}

int64_t CudaTransferStreams::mark(cudaStream_t s) {
  if (marks_.empty()) restart(s);
  cudaEvent_t e = nullptr;
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&e));
  CONVEYOR_CUDA_CHECK(cudaEventRecord(e, s));
  marks_.push_back(e);
  return static_cast<int64_t>(marks_.size()) - 1;
}

double CudaTransferStreams::seconds(int64_t id) {
  if (id <= 0 || id >= static_cast<int64_t>(marks_.size())) return -1;
  cudaEvent_t e = marks_[static_cast<size_t>(id)];
  CONVEYOR_CUDA_CHECK(cudaEventSynchronize(e));
  float ms = 0.f;
  CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[0], e));
  return ms / 1000.0;
}

void CudaTransferStreams::restart(cudaStream_t s) {
  for (cudaEvent_t e : marks_) cudaEventDestroy(e);
  marks_.clear();
  cudaEvent_t base = nullptr;
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&base));
  CONVEYOR_CUDA_CHECK(cudaEventRecord(base, s));
  marks_.push_back(base);
}

}  // namespace conveyor
