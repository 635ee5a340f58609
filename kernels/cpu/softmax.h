// Softmax, log-softmax and argmax over one vector (a row of logits). fp32 in and out, max
// subtracted first so large logits never overflow. The sampler and the tests build on these.
#pragma once

#include <cstdint>

namespace conveyor {

// out[i] = exp(x[i] - max) / sum_j exp(x[j] - max). out may alias x. -inf entries give 0.
void softmax_ref(float* out,      // [n]
                 const float* x,  // [n]
                 int n);

// out[i] = x[i] - max - log(sum_j exp(x[j] - max)). out may alias x.
void log_softmax_ref(float* out,      // [n]
                     const float* x,  // [n]
                     int n);

// Index of the largest element; the first one on ties (as torch.argmax). NaN entries are skipped;
// returns -1 only when every element is NaN.
int32_t argmax_ref(const float* x,  // [n]
                   int n);

}  // namespace conveyor
