// Causal attention over a paged KV cache, the reference for the CUDA prefill and decode kernels.
// Cache layout, per layer, for K and for V alike: [num_blocks, block_size, n_kv_heads, head_dim], so
// one token's K (or V) for all its KV heads is contiguous. Position p of a sequence lives in block
// block_table[p / block_size] at slot p % block_size. MHA, GQA and MQA: query head h reads KV head
// h / (n_heads / n_kv_heads). An FP8 cache (vLLM's --kv-cache-dtype fp8) holds e4m3 codes (one byte
// per element, same layout) with one fp32 scale per tensor for K and one for V: a stored code is
// e4m3(clamp(x / scale, -448, 448)) rounded to nearest even (kernels/cpu/fp8.h, NaN -> 0x7f) and reads
// back as code * scale in fp32; attention then runs exactly as over an fp32 cache of those values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conveyor {

// Geometry of one layer's K (or V) pool.
struct PagedKvShape {
  int num_blocks = 0;
  int block_size = 16;
  int n_kv_heads = 0;
  int head_dim = 0;

  size_t token_elems() const { return static_cast<size_t>(n_kv_heads) * head_dim; }
  size_t block_elems() const { return static_cast<size_t>(block_size) * token_elems(); }
  size_t layer_elems() const { return static_cast<size_t>(num_blocks) * block_elems(); }
};

// The new tokens of one step, grouped by sequence: a prefill chunk or a single decode token each.
// Rows of q/k/v/out are tokens; sequence s owns rows [query_start[s], query_start[s + 1]).
struct AttentionBatch {
  int num_seqs = 0;
  const int32_t* query_start = nullptr;   // [num_seqs + 1], query_start[0] == 0, non-decreasing
  const int32_t* positions = nullptr;     // [tokens] position of each new token in its sequence
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq] block ids
  int max_blocks_per_seq = 0;

  int tokens() const { return num_seqs > 0 ? query_start[num_seqs] : 0; }
};

struct AttentionParams {
  int n_heads = 0;         // query heads (per TP rank); a multiple of PagedKvShape::n_kv_heads
  float scale = 0.f;       // multiplies q.k; 1/sqrt(head_dim) for the Llama family
  int sliding_window = 0;  // > 0: a query at p sees positions (p - sliding_window, p]; 0: all
};

// The per-tensor scales of an FP8 KV cache (per layer; 1.0 when the checkpoint gives none, like vLLM).
struct KvScales {
  float k = 1.f;
  float v = 1.f;
};

// Stores the new tokens' K and V at their positions. Throws (before writing anything) when a
// position falls outside its block table or a block id outside the pool.
void write_kv_cache_ref(float* k_cache,   // [num_blocks, block_size, n_kv_heads, head_dim]
                        float* v_cache,   // [num_blocks, block_size, n_kv_heads, head_dim]
                        const float* k,   // [tokens, n_kv_heads, head_dim]
                        const float* v,   // [tokens, n_kv_heads, head_dim]
                        const AttentionBatch& batch, const PagedKvShape& shape);

// out = softmax(q K^T * scale) V for each new token, over cached positions <= its own (and inside the
// sliding window). The cache must already hold every such position of the sequence.
void paged_attention_ref(float* out,            // [tokens, n_heads, head_dim]
                         const float* q,        // [tokens, n_heads, head_dim]
                         const float* k_cache,  // [num_blocks, block_size, n_kv_heads, head_dim]
                         const float* v_cache,  // [num_blocks, block_size, n_kv_heads, head_dim]
                         const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params);

// One attention step: write_kv_cache_ref, then paged_attention_ref.
void attention_ref(float* out,       // [tokens, n_heads, head_dim]
                   const float* q,   // [tokens, n_heads, head_dim]
                   const float* k,   // [tokens, n_kv_heads, head_dim]
                   const float* v,   // [tokens, n_kv_heads, head_dim]
                   float* k_cache,   // [num_blocks, block_size, n_kv_heads, head_dim]
                   float* v_cache,   // [num_blocks, block_size, n_kv_heads, head_dim]
                   const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params);

// FP8 twins of the three above: the caches hold e4m3 codes, written as code(x / scale) and read as
// code * scale (fp32). Scales must be finite and > 0. paged_attention_fp8_ref equals paged_attention_ref
// over fp32 caches holding the decoded values, bit for bit.
void write_kv_cache_fp8_ref(uint8_t* k_cache,  // [num_blocks, block_size, n_kv_heads, head_dim] e4m3
                            uint8_t* v_cache,  // [num_blocks, block_size, n_kv_heads, head_dim] e4m3
                            const float* k,    // [tokens, n_kv_heads, head_dim]
                            const float* v,    // [tokens, n_kv_heads, head_dim]
                            const AttentionBatch& batch, const PagedKvShape& shape, const KvScales& scales);

void paged_attention_fp8_ref(float* out,              // [tokens, n_heads, head_dim]
                             const float* q,          // [tokens, n_heads, head_dim]
                             const uint8_t* k_cache,  // [num_blocks, block_size, n_kv_heads, head_dim] e4m3
                             const uint8_t* v_cache,  // [num_blocks, block_size, n_kv_heads, head_dim] e4m3
                             const AttentionBatch& batch, const PagedKvShape& shape, const AttentionParams& params,
                             const KvScales& scales);

void attention_fp8_ref(float* out, const float* q, const float* k, const float* v, uint8_t* k_cache,
                       uint8_t* v_cache, const AttentionBatch& batch, const PagedKvShape& shape,
                       const AttentionParams& params, const KvScales& scales);

}  // namespace conveyor
