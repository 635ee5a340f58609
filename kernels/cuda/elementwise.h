// Small element-wise GPU ops around the decoder layer: add, row gather (last token of each
// sequence before the LM head), dtype conversion and a bias add for GEMMs whose bias the cuBLASLt
// epilogue cannot take, and the largest magnitude in a band of columns (FP8 KV scales). Enqueue only;
// device pointers; every result is computed in fp32 and rounded once to the output type.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace conveyor {

// out[i] = a[i] + b[i]. dt: kBF16, kF16 or kF32. out may alias a or b.
void add_cuda(void* out, const void* a, const void* b, int64_t n, DType dt, cudaStream_t s);  // all [n]

// out[i, :] = x[rows[i], :]. Row indices are not validated on the device. dt: kBF16, kF16 or kF32.
void gather_rows_cuda(void* out,              // [n_rows, cols]
                      const void* x,          // [>max(rows) + 1, cols]
                      const int32_t* rows,    // [n_rows]
                      int64_t n_rows, int64_t cols, DType dt, cudaStream_t s);

// dst[i] = src[i] converted (round to nearest even). Types: kF32, kBF16, kF16 in any combination;
// equal types copy. dst must not alias src unless the types are equal and dst == src.
void convert_cuda(void* dst, DType dst_t, const void* src, DType src_t, int64_t n, cudaStream_t s);  // [n]

// y[r, c] += bias[c]. y_t: kF32, kBF16 or kF16; bias_t the same set.
void add_bias_cuda(void* y, DType y_t,           // [rows, cols]
                   const void* bias, DType bias_t,  // [cols]
                   int64_t rows, int64_t cols, cudaStream_t s);

// *out = max |x[r, c]| over every row and c in [col, col + cols), as the bits of a non-negative float
// (which order like uint32). *out must hold 0 before the launch (cudaMemsetAsync); NaN is skipped.
// dt: kBF16, kF16 or kF32.
void abs_max_cols_cuda(uint32_t* out, const void* x, int64_t rows, int64_t width, int64_t col, int64_t cols, DType dt,
                       cudaStream_t s);

// Reads [p, p + bytes) through the L2 (bytes a multiple of 16, p 16-byte aligned) and, as p holds zeros, writes
// nothing: the L2 then holds clean lines of p, so a kernel timed next meets its operands in DRAM without a write-back
// beside it (LaunchTimer::us_cold). p's first word is the target of a store only a nonzero region could trigger,
// which keeps the loads from being dropped.
void read_through_l2_cuda(const void* p, int64_t bytes, cudaStream_t s);

}  // namespace conveyor
