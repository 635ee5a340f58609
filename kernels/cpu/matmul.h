// Dense linear layer with weights in the HF [out, in] layout: y = x W^T (+ bias). fp32 in and out,
// fp32 accumulation. Used for every projection (QKV, O, gate/up, down, LM head), so it is blocked
// and threaded enough for a 135M-parameter model to decode at several tokens/s on two cores.
#pragma once

namespace conveyor {

// y[t, j] = sum_k x[t, k] * w[j, k] + (bias ? bias[j] : 0). y must not alias x or w.
void matmul_ref(float* y,            // [tokens, n]
                const float* x,      // [tokens, k]
                const float* w,      // [n, k]
                const float* bias,   // [n] or nullptr
                int tokens, int n, int k);

}  // namespace conveyor
