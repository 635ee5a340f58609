// Rotary position embedding on the GPU (NeoX rotate-half, as kernels/cpu/rope.h), alone or fused with
// the paged KV-cache write so a decode step touches k and v once. inv_freq comes from RopeTable
// (inv_freq_for / static_inv_freq) uploaded by the caller; cos and sin are taken of the fp32 angle
// position * inv_freq[i], like rope_ref. Launchers only enqueue: no allocation, no synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/dtype.h"

namespace conveyor {

// Rotates q and k in place. dt: kBF16, kF16 or kF32. head_dim even, <= 1024.
void rope_cuda(void* q,                  // [tokens, n_heads, head_dim], dt
               void* k,                  // [tokens, n_kv_heads, head_dim], dt
               const int32_t* positions,  // [tokens], device
               const float* inv_freq,     // [head_dim / 2], device fp32
               int tokens, int n_heads, int n_kv_heads, int head_dim, DType dt, cudaStream_t s);

// From one fused projection: qkv [num_tokens, (n_heads + 2 n_kv_heads) * head_dim] holds q | k | v per
// token (left untouched); rotated q goes to q_out [num_tokens, n_heads, head_dim], rotated k and plain v
// into the pools at each token's position. Positions outside the block table are not written, as in
// write_kv_cache_cuda. n_kv_heads and head_dim come from shape. An FP8 cache (kv.fp8) stores the code of
// the fp32 rotated k (and of v) over its scale, with no rounding to dt in between.
void rope_qkv_write_kv_cuda(void* q_out, const void* qkv, void* k_cache, void* v_cache, const float* inv_freq,
                            const AttentionBatchCuda& b, const PagedKvShape& shape, int n_heads, DType dt,
                            cudaStream_t s, const KvCacheFormat& kv = {});

}  // namespace conveyor
