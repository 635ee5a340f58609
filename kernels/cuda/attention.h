// Paged attention on the GPU: the KV-cache write and causal attention for mixed batches of decodes
// and prefill chunks, the CUDA twins of kernels/cpu/attention.h (same cache layout, same rules).
// Decodes run a GQA-aware split-K kernel (one CTA reads one KV head once for its query heads, a
// reduce kernel merges the context splits); sequences with several new tokens run a flash-attention
// tile kernel on tensor cores. Launchers only enqueue: no allocation, no synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/dtype.h"

namespace conveyor {

// Device pointers with the meaning of kernels/cpu AttentionBatch, plus host-side launch bounds.
struct AttentionBatchCuda {
  int num_seqs = 0;
  int num_tokens = 0;
  const int32_t* query_start = nullptr;   // [num_seqs + 1], device
  const int32_t* positions = nullptr;     // [num_tokens], device
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq], -1 padded, device
  int max_blocks_per_seq = 0;
  // host-side bounds for launch configuration (exact or upper bounds). max_query_len <= 1 sends every
  // token through the decode kernel (correct, slow for long chunks); max_context_len only sets the
  // number of context splits, so an understatement costs speed, never correctness.
  int max_query_len = 0;    // longest new-token run of one sequence in this batch
  int max_context_len = 0;  // largest (last position + 1) of any sequence
  // Optional, device [1]: the exact max_context_len. When set, max_context_len may be any upper bound
  // (it sizes the grid and the workspace) and the kernels split the context as the exact value says,
  // so the result does not depend on the bound (CUDA graphs replay one launch for many steps).
  const int32_t* max_context_len_dev = nullptr;
};

// What the K/V pools hold: elements of the activation dtype dt, or (fp8) e4m3 codes with per-tensor
// scales, written as code(x / scale) and read as code * scale in fp32, as kernels/cpu/attention.h's FP8
// twins do (the codes bit for bit; the hardware cvt converts on sm_89+). Scales must be finite, > 0.
struct KvCacheFormat {
  bool fp8 = false;
  KvScales scales;
};

// Writes k, v into the pools at their positions. A token whose position falls outside its block
// table (entry -1, or past max_blocks_per_seq, or a block id outside the pool) is not written: the
// kernel cannot throw, and the scheduler owns that invariant (write_kv_cache_ref checks it).
void write_kv_cache_cuda(void* k_cache,        // [num_blocks, block_size, n_kv_heads, head_dim], dt or e4m3
                         void* v_cache,        // [num_blocks, block_size, n_kv_heads, head_dim], dt or e4m3
                         const void* k,        // [num_tokens, n_kv_heads, head_dim], dt
                         const void* v,        // [num_tokens, n_kv_heads, head_dim], dt
                         const AttentionBatchCuda& b, const PagedKvShape& shape, DType dt, cudaStream_t s,
                         const KvCacheFormat& kv = {});

// Bytes of split-K partials paged_attention_cuda needs; 0 when it never splits. Monotone in every
// argument, so a workspace sized with upper bounds (tokens, context) serves any smaller batch.
size_t paged_attention_workspace_bytes(int num_tokens, int n_heads, int head_dim, int max_context_len);

// out = causal attention of q over each sequence's cached positions (<= its own position, inside the
// sliding window when p.sliding_window > 0). The cache must already hold the new tokens.
// dt: kBF16 or kF16. head_dim: a multiple of 8 up to 256 (64 and 128 are the tuned ones). An FP8 cache
// (kv.fp8) is read through the same kernels: the decode kernel converts each e4m3 row piece to fp32,
// the prefill kernel converts its tiles to dt (exact) in shared memory; k_scale scales the scores and
// v_scale the output.
void paged_attention_cuda(void* out,             // [num_tokens, n_heads, head_dim], dt
                          const void* q,         // [num_tokens, n_heads, head_dim], dt
                          const void* k_cache,   // [num_blocks, block_size, n_kv_heads, head_dim], dt or e4m3
                          const void* v_cache,   // [num_blocks, block_size, n_kv_heads, head_dim], dt or e4m3
                          const AttentionBatchCuda& b, const PagedKvShape& shape, const AttentionParams& p,
                          void* workspace,       // paged_attention_workspace_bytes(...) bytes, or null if 0
                          DType dt, cudaStream_t s, const KvCacheFormat& kv = {});

// Which tensor-core kernel serves prefill chunks (head_dim 64 and 128): the warpgroup-MMA one (kWgmma) on an
// sm_90 GPU (H100, H200) with a build that has sm_90a code (the default CMAKE_CUDA_ARCHITECTURES "90a"),
// else the mma.sync kernel (kMmaSync, every GPU from sm_80); kAuto takes the first that runs. Forcing one
// is for tests and benchmarks that race them, and so is the environment variable
// CONVEYOR_PREFILL_ATTENTION=mma.sync|wgmma (whole-workload A/B runs; CONVEYOR_WGMMA_SCHEDULE picks how the
// wgmma kernel interleaves products and softmax); forcing wgmma where it cannot run throws. Process-wide,
// not thread-safe against launches.
enum class PrefillAttentionKernel { kAuto, kMmaSync, kWgmma };

// How decode reads an FP8 cache: kMma (the default) runs S = Q K^T and O += P V on tensor cores
// (attention_decode_mma.cu; head_dim 64 and 128, else kNarrow), kNarrow the CUDA-core kernel with 8 codes
// per lane (8-byte copies), kWide the same with 16 codes per lane and up to 2 query heads per CTA. Round 9
// (H100, batch 64 x 4k) measured kNarrow at 1.87 TB/s of FP8 cache and kWide no faster: the CUDA-core math
// per position, not the copies, bounds them; on an H200 kMma read 3.2 TB/s there (kNarrow 1.87) and 3.5-3.7
// at batch 256 x 1,536 and 64 x 16k. The environment variable CONVEYOR_FP8_DECODE=mma|narrow|wide
// sets it at the first FP8 launch unless this was called before. Process-wide, not thread-safe against
// launches; for tests and benchmarks that race them.
enum class Fp8DecodeLayout { kMma, kNarrow, kWide };
void set_fp8_decode_layout(Fp8DecodeLayout layout);
// The decode grids' launch order: token-major, or with `on` a token's KV heads adjacent (the same CTAs, so the
// same bits). CONVEYOR_DECODE_HEADS_FIRST=1 sets it at the first launch unless this was called before; as above.
void set_decode_heads_first(bool on);
void set_prefill_attention_kernel(PrefillAttentionKernel k);
// The kernel a prefill launch on the current device takes now ("wgmma" or "mma.sync").
const char* prefill_attention_kernel_name();

}  // namespace conveyor
