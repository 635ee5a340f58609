// Host-staged MPI transport (see staged_communicator.h).
#include "runtime/dist/cuda/staged_communicator.h"

#include <utility>

#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {

namespace {

cudaStream_t cu(Stream s) { return static_cast<cudaStream_t>(s); }

// A send from a pinned block: the block lives until the MPI send has completed.
class StagedSendRequest : public CommRequest {
 public:
  StagedSendRequest(std::unique_ptr<CommRequest> mpi, PinnedLease block)
      : block_(std::move(block)), mpi_(std::move(mpi)) {}
  void wait() override { mpi_->wait(); }
  bool done() override { return mpi_->done(); }

 private:
  // Members are destroyed in reverse order: the MPI request completes before the block is given back.
  PinnedLease block_;
  std::unique_ptr<CommRequest> mpi_;
};

// A receive into a pinned block; wait() enqueues the copy to the device on the receive's stream.
class StagedRecvRequest : public CommRequest {
 public:
  StagedRecvRequest(std::unique_ptr<CommRequest> mpi, PinnedLease block, void* dst, size_t bytes, Stream stream)
      : block_(std::move(block)), mpi_(std::move(mpi)), dst_(dst), bytes_(bytes), stream_(stream) {}
  void wait() override {
    if (copied_) return;
    mpi_->wait();
    stage_to_device(block_, dst_, bytes_, stream_);
    copied_ = true;
  }
  bool done() override { return copied_ || mpi_->done(); }

 private:
  PinnedLease block_;
  std::unique_ptr<CommRequest> mpi_;
  void* dst_;
  size_t bytes_;
  Stream stream_;
  bool copied_ = false;
};

MPI_Comm dup_of(MPI_Comm group) {
  MPI_Comm dup = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(group, &dup));
  return dup;
}

}  // namespace

void stage_to_device(const PinnedLease& block, void* device_dst, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(device_dst, block->data, bytes, cudaMemcpyHostToDevice, cu(stream)));
  CONVEYOR_CUDA_CHECK(cudaEventRecord(block->last_use, cu(stream)));
}

StagedCommunicator::StagedCommunicator(MPI_Comm group, std::string name)
    : host_(std::make_unique<MpiCommunicator>(dup_of(group), std::move(name))),
      pool_(std::make_shared<PinnedPool>()) {}

PinnedLease StagedCommunicator::to_host(const void* device_src, size_t bytes, Stream stream) {
  PinnedLease block = pool_->acquire(bytes);
  if (bytes == 0) return block;
  CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(block->data, device_src, bytes, cudaMemcpyDeviceToHost, cu(stream)));
  CONVEYOR_CUDA_CHECK(cudaEventRecord(block->last_use, cu(stream)));
  CONVEYOR_CUDA_CHECK(cudaEventSynchronize(block->last_use));
  return block;
}

void StagedCommunicator::send(const void* buf, size_t count, DType dtype, int peer, Stream stream) {
  PinnedLease block = to_host(buf, count * dtype_size(dtype), stream);
  host_->send(block->data, count, dtype, peer, nullptr);
}

void StagedCommunicator::recv(void* buf, size_t count, DType dtype, int peer, Stream stream) {
  const size_t bytes = count * dtype_size(dtype);
  PinnedLease block = pool_->acquire(bytes);
  host_->recv(block->data, count, dtype, peer, nullptr);
  stage_to_device(block, buf, bytes, stream);
}

std::unique_ptr<CommRequest> StagedCommunicator::isend(const void* buf, size_t count, DType dtype, int peer,
                                                       Stream stream) {
  PinnedLease block = to_host(buf, count * dtype_size(dtype), stream);
  auto mpi = host_->isend(block->data, count, dtype, peer, nullptr);
  return std::make_unique<StagedSendRequest>(std::move(mpi), std::move(block));
}

std::unique_ptr<CommRequest> StagedCommunicator::irecv(void* buf, size_t count, DType dtype, int peer,
                                                       Stream stream) {
  const size_t bytes = count * dtype_size(dtype);
  PinnedLease block = pool_->acquire(bytes);
  auto mpi = host_->irecv(block->data, count, dtype, peer, nullptr);
  return std::make_unique<StagedRecvRequest>(std::move(mpi), std::move(block), buf, bytes, stream);
}

void StagedCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                    Stream stream) {
  const size_t bytes = count * dtype_size(dtype);
  PinnedLease block = to_host(send, bytes, stream);
  host_->all_reduce(block->data, block->data, count, dtype, op, nullptr);
  stage_to_device(block, recv, bytes, stream);
}

void StagedCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype, Stream stream) {
  const size_t bytes = count * dtype_size(dtype);
  PinnedLease mine = to_host(send, bytes, stream);
  PinnedLease all = pool_->acquire(bytes * static_cast<size_t>(size()));
  host_->all_gather(mine->data, all->data, count, dtype, nullptr);
  stage_to_device(all, recv, bytes * static_cast<size_t>(size()), stream);
}

void StagedCommunicator::broadcast(void* buf, size_t count, DType dtype, int root, Stream stream) {
  const size_t bytes = count * dtype_size(dtype);
  PinnedLease block = rank() == root ? to_host(buf, bytes, stream) : pool_->acquire(bytes);
  host_->broadcast(block->data, count, dtype, root, nullptr);
  if (rank() != root) stage_to_device(block, buf, bytes, stream);
}

void StagedCommunicator::barrier(Stream stream) {
  CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(cu(stream)));
  host_->barrier(nullptr);
}

}  // namespace conveyor
