// RMSNorm with Llama semantics: normalise in fp32, then multiply by the weight
// (out = x / sqrt(mean(x^2) + eps) * w). The residual add is not fused here: the layers add the
// sublayer output to the residual themselves (a GPU accumulates it in the GEMM).
#pragma once

namespace conveyor {

// out[t, :] = rmsnorm(x[t, :]) * weight. out may alias x.
void rms_norm_ref(float* out,           // [tokens, hidden]
                  const float* x,       // [tokens, hidden]
                  const float* weight,  // [hidden]
                  int tokens, int hidden, float eps);

}  // namespace conveyor
