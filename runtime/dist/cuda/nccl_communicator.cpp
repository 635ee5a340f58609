// NCCL transport (see nccl_communicator.h).
#include "runtime/dist/cuda/nccl_communicator.h"

#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF64: return ncclFloat64;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
  }
  CONVEYOR_THROW("no NCCL type for dtype ", dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kSum ? ncclSum : op == ReduceOp::kMax ? ncclMax : ncclMin;
}

cudaStream_t cu(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

// Completion of an enqueued NCCL p2p operation, tracked by an event on its stream.
class NcclRequest : public CommRequest {
 public:
  NcclRequest() { CONVEYOR_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  void record(cudaStream_t stream) { CONVEYOR_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  ~NcclRequest() override { cudaEventDestroy(event_); }
  void wait() override { CONVEYOR_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool done() override {
    cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    CONVEYOR_CUDA_CHECK(rc);
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

NcclCommunicator::NcclCommunicator(MPI_Comm group, std::string name) : name_(std::move(name)) {
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(group, &rank_));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(group, &size_));
  ncclUniqueId id;
  if (rank_ == 0) CONVEYOR_NCCL_CHECK(ncclGetUniqueId(&id));
  CONVEYOR_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group));
  CONVEYOR_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  CONVEYOR_CUDA_CHECK(cudaMalloc(&barrier_buf_, sizeof(float)));
}

NcclCommunicator::~NcclCommunicator() {
  if (barrier_buf_) cudaFree(barrier_buf_);
  if (comm_) ncclCommDestroy(comm_);
}

std::string NcclCommunicator::async_error() const {
  if (!comm_) return "";  // aborted: the error that caused it was reported already
  ncclResult_t err = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &err) != ncclSuccess) return "ncclCommGetAsyncError failed on " + name_;
  if (err == ncclSuccess || err == ncclInProgress) return "";
  return std::string("NCCL error on ") + name_ + ": " + ncclGetErrorString(err);
}

void NcclCommunicator::abort() {
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::send(const void* buf, size_t count, DType dtype, int peer, Stream stream) {
  CONVEYOR_CHECK(peer >= 0 && peer < size_, "send on ", name_, ": peer ", peer, " outside group of ", size_);
  CONVEYOR_NCCL_CHECK(ncclSend(buf, count, nccl_type(dtype), peer, comm_, cu(stream)));
}

void NcclCommunicator::recv(void* buf, size_t count, DType dtype, int peer, Stream stream) {
  CONVEYOR_CHECK(peer >= 0 && peer < size_, "recv on ", name_, ": peer ", peer, " outside group of ", size_);
  CONVEYOR_NCCL_CHECK(ncclRecv(buf, count, nccl_type(dtype), peer, comm_, cu(stream)));
}

std::unique_ptr<CommRequest> NcclCommunicator::isend(const void* buf, size_t count, DType dtype, int peer,
                                                     Stream stream) {
  send(buf, count, dtype, peer, stream);
  return make_request(stream);
}

std::unique_ptr<CommRequest> NcclCommunicator::irecv(void* buf, size_t count, DType dtype, int peer,
                                                     Stream stream) {
  recv(buf, count, dtype, peer, stream);
  return make_request(stream);
}

std::unique_ptr<CommRequest> NcclCommunicator::make_request(Stream stream) {
  auto req = std::make_unique<NcclRequest>();
  if (group_depth_ > 0) {
    pending_.emplace_back(req.get(), stream);
  } else {
    req->record(cu(stream));
  }
  return req;
}

void NcclCommunicator::group_start() {
  CONVEYOR_NCCL_CHECK(ncclGroupStart());
  ++group_depth_;
}

void NcclCommunicator::group_end() {
  CONVEYOR_CHECK(group_depth_ > 0, "group_end on ", name_, " without group_start");
  CONVEYOR_NCCL_CHECK(ncclGroupEnd());
  if (--group_depth_ == 0) {
    for (auto& [req, stream] : pending_) req->record(cu(stream));
    pending_.clear();
  }
}

void NcclCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                  Stream stream) {
  CONVEYOR_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), comm_, cu(stream)));
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype, Stream stream) {
  CONVEYOR_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(dtype), comm_, cu(stream)));
}

void NcclCommunicator::broadcast(void* buf, size_t count, DType dtype, int root, Stream stream) {
  CONVEYOR_CHECK(root >= 0 && root < size_, "broadcast on ", name_, ": root ", root, " outside group of ", size_);
  CONVEYOR_NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(dtype), root, comm_, cu(stream)));
}

void NcclCommunicator::barrier(Stream stream) {
  CONVEYOR_NCCL_CHECK(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclFloat32, ncclSum, comm_, cu(stream)));
  CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(cu(stream)));
}

}  // namespace conveyor
