// Element-wise additions used around the decoder layer: residual adds, bias adds and the sum of
// partial results (e.g. vocab-parallel shards on the CPU transport); and the largest magnitude in a band
// of columns (the K or V part of a fused projection, for FP8 KV scales).
#pragma once

namespace conveyor {

// out[i] = a[i] + b[i]. out may alias a or b.
void add_ref(float* out, const float* a, const float* b, long long n);  // all [n]

// acc[i] += x[i].
void add_inplace_ref(float* acc,      // [n]
                     const float* x,  // [n]
                     long long n);

// x[r, c] += bias[c] for every row.
void add_bias_ref(float* x,           // [rows, cols]
                  const float* bias,  // [cols]
                  int rows, int cols);

// max |x[r, c]| over every row r and c in [col, col + cols); 0 for no rows. NaN is skipped.
float abs_max_cols_ref(const float* x,  // [rows, width]
                       long long rows, long long width, long long col, long long cols);

}  // namespace conveyor
