// The paged KV write (see attention.h): one CTA per new token copies its K and V rows into their pool
// rows (16-byte vectors where aligned), or, for an FP8 cache, writes each element's e4m3 code over its
// scale as the CPU twin does.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_device.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using cuda_detail::Elem;
using cuda_detail::Fp8Kv;

constexpr int kThreads = 128;

template <typename T, typename KV>
__global__ void __launch_bounds__(kThreads)
    write_kv_kernel(KV* k_cache, KV* v_cache, const T* k, const T* v, const int32_t* query_start,
                    const int32_t* positions, const int32_t* block_tables, int num_seqs, int max_blocks,
                    int num_blocks, int block_size, long long token_elems, float k_scale, float v_scale) {
  __shared__ long long row_s;
  const int t = blockIdx.x;
  if (threadIdx.x < 32) {
    const int seq = cuda_detail::find_seq(query_start, num_seqs, t);
    if (threadIdx.x == 0) {
      row_s = cuda_detail::cache_row(block_tables + static_cast<long long>(seq) * max_blocks, max_blocks,
                                     __ldg(positions + t), block_size, num_blocks, token_elems);
    }
  }
  __syncthreads();
  const long long row = row_s;
  if (row < 0) return;
  const T* ks = k + t * token_elems;
  const T* vs = v + t * token_elems;
  if constexpr (!std::is_same_v<T, KV>) {  // FP8: the code of each element over its scale
    for (long long i = threadIdx.x; i < token_elems; i += blockDim.x) {
      cuda_detail::store_kv(k_cache + row + i, Elem<T>::to_float(ks[i]), k_scale);
      cuda_detail::store_kv(v_cache + row + i, Elem<T>::to_float(vs[i]), v_scale);
    }
  } else {
    const bool vec = (token_elems * sizeof(T)) % 16 == 0 &&
                     ((reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v) |
                       reinterpret_cast<uintptr_t>(k_cache) | reinterpret_cast<uintptr_t>(v_cache)) % 16) == 0;
    if (vec) {
      const long long n = token_elems * sizeof(T) / 16;
      for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        reinterpret_cast<uint4*>(k_cache + row)[i] = reinterpret_cast<const uint4*>(ks)[i];
        reinterpret_cast<uint4*>(v_cache + row)[i] = reinterpret_cast<const uint4*>(vs)[i];
      }
    } else {
      for (long long i = threadIdx.x; i < token_elems; i += blockDim.x) {
        k_cache[row + i] = ks[i];
        v_cache[row + i] = vs[i];
      }
    }
  }
}

}  // namespace

namespace cuda_detail {
void check_kv_format(const KvCacheFormat& kv, const char* who) {
  if (!kv.fp8) return;
  CONVEYOR_CHECK(std::isfinite(kv.scales.k) && kv.scales.k > 0.f && std::isfinite(kv.scales.v) && kv.scales.v > 0.f,
                 who, ": FP8 KV scales must be finite and > 0, got k_scale ", kv.scales.k, ", v_scale ", kv.scales.v);
}
}  // namespace cuda_detail

void write_kv_cache_cuda(void* k_cache, void* v_cache, const void* k, const void* v, const AttentionBatchCuda& b,
                         const PagedKvShape& shape, DType dt, cudaStream_t s, const KvCacheFormat& kv) {
  CONVEYOR_CHECK(shape.num_blocks > 0 && shape.block_size > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0,
                 "write_kv_cache_cuda: bad KV cache shape num_blocks=", shape.num_blocks, " block_size=",
                 shape.block_size, " n_kv_heads=", shape.n_kv_heads, " head_dim=", shape.head_dim);
  CONVEYOR_CHECK(b.num_tokens >= 0 && (b.num_tokens == 0 || b.num_seqs > 0),
                 "write_kv_cache_cuda: bad batch tokens=", b.num_tokens, " seqs=", b.num_seqs);
  cuda_detail::check_kv_format(kv, "write_kv_cache_cuda");
  if (b.num_tokens == 0) return;
  CONVEYOR_CHECK(k_cache && v_cache && k && v && b.query_start && b.positions && b.block_tables,
                 "write_kv_cache_cuda: null pointer argument");
  const long long te = static_cast<long long>(shape.token_elems());
#define CONVEYOR_WRITE_KV(T, KV)                                                                                 \
  write_kv_kernel<T, KV><<<b.num_tokens, kThreads, 0, s>>>(                                                       \
      static_cast<KV*>(k_cache), static_cast<KV*>(v_cache), static_cast<const T*>(k), static_cast<const T*>(v), \
      b.query_start, b.positions, b.block_tables, b.num_seqs, b.max_blocks_per_seq, shape.num_blocks,          \
      shape.block_size, te, kv.scales.k, kv.scales.v)
  switch (dt) {
    case DType::kBF16:
      if (kv.fp8) CONVEYOR_WRITE_KV(__nv_bfloat16, Fp8Kv);
      else CONVEYOR_WRITE_KV(__nv_bfloat16, __nv_bfloat16);
      break;
    case DType::kF16:
      if (kv.fp8) CONVEYOR_WRITE_KV(__half, Fp8Kv);
      else CONVEYOR_WRITE_KV(__half, __half);
      break;
    case DType::kF32:
      if (kv.fp8) CONVEYOR_WRITE_KV(float, Fp8Kv);
      else CONVEYOR_WRITE_KV(float, float);
      break;
    default: CONVEYOR_THROW("write_kv_cache_cuda: dtype must be bf16, f16 or f32, got ", dtype_name(dt));
  }
#undef CONVEYOR_WRITE_KV
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace conveyor
