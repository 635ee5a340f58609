// Element-wise additions used around the decoder layer: residual adds, bias adds and the sum of
// partial results (e.g. vocab-parallel shards on the CPU transport).
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

}  // namespace conveyor
