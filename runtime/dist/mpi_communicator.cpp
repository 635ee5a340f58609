// MPI transport (see mpi_communicator.h). Large messages are split so no count exceeds INT_MAX.
#include "runtime/dist/mpi_communicator.h"

#include <algorithm>

#include <climits>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

MPI_Datatype half_type(int which) {
  static MPI_Datatype types[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
  if (types[which] == MPI_DATATYPE_NULL) {
    CONVEYOR_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &types[which]));
    CONVEYOR_MPI_CHECK(MPI_Type_commit(&types[which]));
  }
  return types[which];
}

template <typename Convert, typename Back>
void reduce_half(void* in, void* inout, int n, ReduceOp op, Convert to_f, Back from_f) {
  auto* a = static_cast<uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < n; ++i) {
    float x = to_f(a[i]), y = to_f(b[i]);
    float r = op == ReduceOp::kSum ? x + y : op == ReduceOp::kMax ? (x > y ? x : y) : (x < y ? x : y);
    b[i] = from_f(r);
  }
}

template <ReduceOp Op>
void bf16_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_half(in, inout, *len, Op, bf16_to_float, float_to_bf16);
}
template <ReduceOp Op>
void f16_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_half(in, inout, *len, Op, f16_to_float, float_to_f16);
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) {
    return op == ReduceOp::kSum ? MPI_SUM : op == ReduceOp::kMax ? MPI_MAX : MPI_MIN;
  }
  static MPI_Op ops[2][3] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};
  int d = dtype == DType::kBF16 ? 0 : 1;
  int o = static_cast<int>(op);
  if (ops[d][o] == MPI_OP_NULL) {
    MPI_User_function* fns[2][3] = {{bf16_op<ReduceOp::kSum>, bf16_op<ReduceOp::kMax>, bf16_op<ReduceOp::kMin>},
                                    {f16_op<ReduceOp::kSum>, f16_op<ReduceOp::kMax>, f16_op<ReduceOp::kMin>}};
    CONVEYOR_MPI_CHECK(MPI_Op_create(fns[d][o], 1, &ops[d][o]));
  }
  return ops[d][o];
}

// Splits [0, count) into pieces of at most INT_MAX / 2 elements, or of at most max_bytes when it is > 0.
template <typename F>
void for_each_chunk(size_t count, DType dtype, F&& f, size_t max_bytes = 0) {
  size_t kMax = static_cast<size_t>(INT_MAX) / 2;
  if (max_bytes > 0) kMax = std::min(kMax, std::max<size_t>(1, max_bytes / dtype_size(dtype)));
  size_t off = 0;
  do {
    size_t n = count - off < kMax ? count - off : kMax;
    f(off * dtype_size(dtype), static_cast<int>(n));
    off += n;
  } while (off < count);
}

class MpiRequest : public CommRequest {
 public:
  explicit MpiRequest(std::vector<MPI_Request> reqs) : reqs_(std::move(reqs)) {}
  ~MpiRequest() override {
    // A request dropped without wait() must still complete before its buffer goes away.
    if (!reqs_.empty()) MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    CONVEYOR_MPI_CHECK(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    reqs_.clear();
  }
  bool done() override {
    int flag = 0;
    CONVEYOR_MPI_CHECK(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) reqs_.clear();
    return flag != 0;
  }

 private:
  std::vector<MPI_Request> reqs_;
};

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    case DType::kBF16: return half_type(0);
    case DType::kF16: return half_type(1);
  }
  CONVEYOR_THROW("no MPI datatype for dtype ", static_cast<int>(dtype));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_peer(int peer, const char* op) const {
  CONVEYOR_CHECK(peer >= 0 && peer < size_, op, " on ", name_, ": peer ", peer, " outside group of ", size_);
}

void MpiCommunicator::send(const void* buf, size_t count, DType dtype, int peer, Stream) {
  check_peer(peer, "send");
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    CONVEYOR_MPI_CHECK(MPI_Send(static_cast<const char*>(buf) + byte_off, n, mpi_datatype(dtype), peer, 0, comm_));
  }, message_bytes_);
}

void MpiCommunicator::recv(void* buf, size_t count, DType dtype, int peer, Stream) {
  check_peer(peer, "recv");
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    CONVEYOR_MPI_CHECK(
        MPI_Recv(static_cast<char*>(buf) + byte_off, n, mpi_datatype(dtype), peer, 0, comm_, MPI_STATUS_IGNORE));
  }, message_bytes_);
}

std::unique_ptr<CommRequest> MpiCommunicator::isend(const void* buf, size_t count, DType dtype, int peer, Stream) {
  check_peer(peer, "isend");
  std::vector<MPI_Request> reqs;
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    reqs.emplace_back();
    CONVEYOR_MPI_CHECK(MPI_Isend(static_cast<const char*>(buf) + byte_off, n, mpi_datatype(dtype), peer, 0, comm_,
                                 &reqs.back()));
  }, message_bytes_);
  return std::make_unique<MpiRequest>(std::move(reqs));
}

std::unique_ptr<CommRequest> MpiCommunicator::irecv(void* buf, size_t count, DType dtype, int peer, Stream) {
  check_peer(peer, "irecv");
  std::vector<MPI_Request> reqs;
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    reqs.emplace_back();
    CONVEYOR_MPI_CHECK(
        MPI_Irecv(static_cast<char*>(buf) + byte_off, n, mpi_datatype(dtype), peer, 0, comm_, &reqs.back()));
  }, message_bytes_);
  return std::make_unique<MpiRequest>(std::move(reqs));
}

void MpiCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, Stream) {
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    char* out = static_cast<char*>(recv) + byte_off;
    const void* in = send == recv ? MPI_IN_PLACE : static_cast<const char*>(send) + byte_off;
    CONVEYOR_MPI_CHECK(MPI_Allreduce(in, out, n, mpi_datatype(dtype), mpi_op(dtype, op), comm_));
  });
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t count, DType dtype, Stream) {
  CONVEYOR_CHECK(count <= static_cast<size_t>(INT_MAX), "all_gather on ", name_, ": ", count,
                 " elements per rank exceeds INT_MAX");
  CONVEYOR_MPI_CHECK(MPI_Allgather(send, static_cast<int>(count), mpi_datatype(dtype), recv,
                                   static_cast<int>(count), mpi_datatype(dtype), comm_));
}

void MpiCommunicator::broadcast(void* buf, size_t count, DType dtype, int root, Stream) {
  check_peer(root, "broadcast");
  for_each_chunk(count, dtype, [&](size_t byte_off, int n) {
    CONVEYOR_MPI_CHECK(MPI_Bcast(static_cast<char*>(buf) + byte_off, n, mpi_datatype(dtype), root, comm_));
  });
}

void MpiCommunicator::barrier(Stream) { CONVEYOR_MPI_CHECK(MPI_Barrier(comm_)); }

}  // namespace conveyor
