// RMSNorm with Llama semantics: normalise in fp32, then multiply by the weight
// (out = x / sqrt(mean(x^2) + eps) * w). The fused variant first adds the sublayer output into the
// residual stream, which is how every decoder layer uses it.
#pragma once

namespace conveyor {

// out[t, :] = rmsnorm(x[t, :]) * weight. out may alias x.
void rms_norm_ref(float* out,           // [tokens, hidden]
                  const float* x,       // [tokens, hidden]
                  const float* weight,  // [hidden]
                  int tokens, int hidden, float eps);

// residual[t, :] += x[t, :]; out[t, :] = rmsnorm(residual[t, :]) * weight. out may alias x.
void fused_add_rms_norm_ref(float* out,           // [tokens, hidden]
                            const float* x,       // [tokens, hidden] sublayer output
                            float* residual,      // [tokens, hidden] in: residual stream, out: + x
                            const float* weight,  // [hidden]
                            int tokens, int hidden, float eps);

}  // namespace conveyor
