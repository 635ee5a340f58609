// SwiGLU kernels (see silu_mul.h). The grid is rows x column blocks flattened into gridDim.x, so a
// block finds its row with one division; the fast path moves 16 bytes per load and store when
// inter is a multiple of the pack size and the pointers are aligned.
#include "kernels/cuda/silu_mul.h"

#include "kernels/cuda/dense_vec.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

using cuda_detail::load_pack;
using cuda_detail::Pack;
using cuda_detail::silu_mul_one;
using cuda_detail::store_pack;

constexpr int kThreads = 256;

// `width` items per row (packs or elements), col_blocks = ceil(width / kThreads) blocks per row.
template <typename T, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(T* __restrict__ out, const T* __restrict__ gate_up, int64_t inter, int64_t width,
                    int64_t col_blocks) {
  cuda_detail::pdl_wait();               // pdl.cuh: this kernel reads the one before ...
  cuda_detail::pdl_launch_dependents();  // ... and the next may be placed now
  const int64_t row = blockIdx.x / col_blocks;
  const int64_t item = (blockIdx.x % col_blocks) * kThreads + threadIdx.x;
  if (item >= width) return;
  const T* g = gate_up + row * 2 * inter;
  const T* u = g + inter;
  T* o = out + row * inter;
  if constexpr (kPacked) {
    constexpr int kN = Pack<T>::kSize;
    const Pack<T> gp = load_pack(g + item * kN);
    const Pack<T> up = load_pack(u + item * kN);
    Pack<T> op;
#pragma unroll
    for (int j = 0; j < kN; ++j) op.v[j] = silu_mul_one(gp.v[j], up.v[j]);
    store_pack(o + item * kN, op);
  } else {
    o[item] = silu_mul_one(g[item], u[item]);
  }
}

template <typename T>
void launch(T* out, const T* gate_up, int64_t tokens, int64_t inter, cudaStream_t s) {
  constexpr int kN = Pack<T>::kSize;
  const bool packed = inter % kN == 0 && cuda_detail::is_aligned16(out) && cuda_detail::is_aligned16(gate_up);
  const int64_t width = packed ? inter / kN : inter;
  const int64_t col_blocks = (width + kThreads - 1) / kThreads;
  const int64_t blocks = tokens * col_blocks;
  CONVEYOR_CHECK(blocks <= 0x7fffffff, "silu_mul_cuda: tokens=", tokens, " x inter=", inter,
                 " needs more than 2^31-1 blocks; split the call");
  cuda_detail::launch_maybe_pdl(packed ? silu_mul_kernel<T, true> : silu_mul_kernel<T, false>,
                                dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, s, out, gate_up, inter, width,
                                col_blocks);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void silu_mul_cuda(void* out, const void* gate_up, int64_t tokens, int64_t inter, DType dt, cudaStream_t s) {
  CONVEYOR_CHECK(tokens >= 0 && inter > 0, "silu_mul_cuda: bad shape tokens=", tokens, " inter=", inter);
  if (tokens == 0) return;
  CONVEYOR_CHECK(out != nullptr && gate_up != nullptr, "silu_mul_cuda: null device pointer");
  CONVEYOR_DISPATCH_FLOAT(dt, "silu_mul_cuda", true,
                          launch<T>(static_cast<T*>(out), static_cast<const T*>(gate_up), tokens, inter, s));
}

}  // namespace conveyor
