// SwiGLU activation: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)). The input is the output of
// a fused gate_up projection, one row per token with the gate half first and the up half second
// (the CUDA kernel reads the same layout); a split variant takes two separate buffers.
#pragma once

namespace conveyor {

// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i]. out must not alias gate_up.
void silu_mul_ref(float* out,            // [tokens, inter]
                  const float* gate_up,  // [tokens, 2 * inter]: gate | up
                  int tokens, int inter);

// out[i] = silu(gate[i]) * up[i] over n elements. out may alias gate or up.
void silu_mul_split_ref(float* out,         // [n]
                        const float* gate,  // [n]
                        const float* up,    // [n]
                        long long n);

}  // namespace conveyor
