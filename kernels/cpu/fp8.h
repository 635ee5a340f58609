// FP8 E4M3 (OCP "fn": bias 7, no infinities, S.1111.111 is NaN, largest finite 448) exactly as the
// GPU produces it: encode rounds to nearest even and saturates to +-448 (CUDA's satfinite), NaN
// encodes as 0x7f. Row quantization (per output channel for weights, per token for activations) is
// compressed-tensors' symmetric scheme: scale = amax / 448 in fp32, a zero scale replaced by fp32
// epsilon, code = e4m3(clamp(x / scale, -448, 448)). The GEMM twin multiplies decoded codes (each
// product exact in fp32), accumulates in fp32 and applies row x column scales once at the end.
#pragma once

#include <cstdint>

namespace conveyor {

constexpr float kFp8E4M3Max = 448.0f;

uint8_t fp8_e4m3_from_float(float x);
float fp8_e4m3_to_float(uint8_t code);
// The 256 decoded codes, indexed by code (a table: decoding sits in every GEMM inner loop).
const float* fp8_e4m3_table();

// The scale compressed-tensors gives a row of absolute maximum amax.
float fp8_row_scale(float amax);

// scales[r] = fp8_row_scale(max_c |x[r, c]|), q[r, c] = code of x[r, c] / scales[r].
void quantize_rows_fp8_ref(uint8_t* q,        // [rows, cols]
                           float* scales,     // [rows]
                           const float* x,    // [rows, cols]
                           int64_t rows, int64_t cols);
// q[i] = code of x[i] / scale (a static, calibrated activation scale).
void quantize_fp8_static_ref(uint8_t* q, const float* x, int64_t n, float scale);
// Decodes codes to floats: out[i] = e4m3(q[i]) * (scales ? scales[i / cols] : 1).
void dequantize_rows_fp8_ref(float* out, const uint8_t* q, const float* scales, int64_t rows, int64_t cols);

// y[i, j] = (sum_k e4m3(a[i, k]) e4m3(b[j, k])) * a_scale[i] * b_scale[j] + bias[j], b in the HF
// [out, in] layout. Plain loops: the spec the GPU kernels are held to.
void matmul_fp8_ref(float* y,               // [m, n]
                    const uint8_t* a,       // [m, k]
                    const float* a_scale,   // [m]
                    const uint8_t* b,       // [n, k]
                    const float* b_scale,   // [n]
                    const float* bias,      // [n] or nullptr
                    int64_t m, int64_t n, int64_t k);

// The CPU backend's FP8 linear: x (fp32) quantized per token (input_scale 0) or with a static
// input_scale, times weights held as decoded codes w_codes (exact fp32 values of e4m3 codes) with
// per-row w_scale; the product runs through the blocked fp32 matmul (equal to matmul_fp8_ref up to
// the summation order).
void linear_fp8_ref(float* y,              // [tokens, n]
                    const float* x,        // [tokens, k]
                    const float* w_codes,  // [n, k]
                    const float* w_scale,  // [n]
                    float input_scale,     // 0: dynamic per token
                    const float* bias,     // [n] or nullptr
                    int tokens, int n, int k);

}  // namespace conveyor
