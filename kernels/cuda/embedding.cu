// Embedding gather (see embedding.h): one block per token copies its row, 16 bytes at a time when
// hidden is a multiple of 16 bytes and the pointers are aligned.
#include "kernels/cuda/embedding.h"

#include "kernels/cuda/dense_vec.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

constexpr int kThreads = 256;

// Copies rows of `width` units of U (a 16-byte uint4 or one element) per token.
template <typename U>
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(U* __restrict__ out, const U* __restrict__ table, const int32_t* __restrict__ ids,
                     int64_t width, int64_t vocab_start, int64_t vocab_size) {
  const int64_t t = blockIdx.x;
  const int64_t row = static_cast<int64_t>(ids[t]) - vocab_start;
  const bool inside = row >= 0 && row < vocab_size;
  U* o = out + t * width;
  const U* src = table + (inside ? row : 0) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    if (inside) {
      o[i] = src[i];
    } else {
      o[i] = U{};
    }
  }
}

template <typename U>
void launch(void* out, const void* table, const int32_t* ids, int64_t tokens, int64_t width, int64_t vocab_start,
            int64_t vocab_size, cudaStream_t s) {
  const int threads = width >= kThreads ? kThreads : static_cast<int>((width + 31) / 32 * 32);
  embedding_kernel<U><<<static_cast<unsigned>(tokens), threads, 0, s>>>(
      static_cast<U*>(out), static_cast<const U*>(table), ids, width, vocab_start, vocab_size);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void embedding_cuda(void* out, const void* table, const int32_t* ids, int64_t tokens, int64_t hidden,
                    int64_t vocab_start, int64_t vocab_size, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(tokens >= 0 && tokens <= 0x7fffffff && hidden > 0, "embedding_cuda: bad shape tokens=", tokens,
                 " hidden=", hidden);
  CONVEYOR_CHECK(vocab_start >= 0 && vocab_size > 0, "embedding_cuda: bad vocab shard start=", vocab_start,
                 " size=", vocab_size);
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kF32, "embedding_cuda: unsupported dtype ",
                 dtype_name(dt), "; use bf16, f16 or f32");
  if (tokens == 0) return;
  CONVEYOR_CHECK(out != nullptr && table != nullptr && ids != nullptr, "embedding_cuda: null device pointer");
  // Only bytes move, so the element type does not matter beyond its size.
  const int64_t row_bytes = hidden * static_cast<int64_t>(dtype_size(dt));
  if (row_bytes % 16 == 0 && cuda_detail::is_aligned16(out) && cuda_detail::is_aligned16(table)) {
    launch<uint4>(out, table, ids, tokens, row_bytes / 16, vocab_start, vocab_size, s);
  } else if (dt == DType::kF32) {
    launch<float>(out, table, ids, tokens, hidden, vocab_start, vocab_size, s);
  } else {
    launch<uint16_t>(out, table, ids, tokens, hidden, vocab_start, vocab_size, s);
  }
}

}  // namespace conveyor
