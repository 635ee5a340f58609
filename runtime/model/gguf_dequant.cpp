// Block decoders (see gguf_dequant.h). Every product and sum is a separate statement so no compiler
// contracts a*b+c into an FMA, which would round differently from the reference.
#include "runtime/model/gguf_dequant.h"

#include <cstring>

#include "kernels/dtype.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

constexpr int kQK = 32;    // elements per block of the 32-element types
constexpr int kQKK = 256;  // elements per super-block of the K types

float f16_at(const uint8_t* p) { return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// Q8_0: f16 scale d, then 32 int8 quants; x = q * d.
void dequant_q8_0(const uint8_t* b, float* y) {
  float d = f16_at(b);
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d;
}

// Q4_0: f16 scale d, 16 bytes; low nibbles are elements 0..15, high nibbles 16..31; x = d * (q - 8).
void dequant_q4_0(const uint8_t* b, float* y) {
  float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: f16 scale d, f16 minimum m, 16 bytes of nibbles as Q4_0; x = d * q + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  float d = f16_at(b);
  float m = f16_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    float lo = d * static_cast<float>(qs[j] & 0x0f);
    float hi = d * static_cast<float>(qs[j] >> 4);
    y[j] = lo + m;
    y[j + kQK / 2] = hi + m;
  }
}

// Q4_K scales: 12 bytes pack eight 6-bit scales and eight 6-bit minimums. Sub-blocks 0..3 use the low
// 6 bits of bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7 take their low 4 bits from bytes
// 8..11 and their high 2 bits from the top of bytes 0..3 / 4..7.
void q4_k_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    *mn = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Eight sub-blocks of 32; sub-block
// 2g uses the low nibbles of bytes 32g..32g+31 and 2g+1 their high nibbles; x = (d*sc)*q - (dmin*m).
void dequant_q4_k(const uint8_t* b, float* y) {
  float d = f16_at(b);
  float dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int sub = 0; sub < 8; ++sub) {
    uint8_t sc, mn;
    q4_k_scale_min(scales, sub, &sc, &mn);
    float ds = d * static_cast<float>(sc);
    float dm = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + (sub / 2) * 32;
    int shift = (sub % 2) * 4;
    for (int j = 0; j < 32; ++j) {
      float v = ds * static_cast<float>((q[j] >> shift) & 0x0f);
      y[sub * 32 + j] = v - dm;
    }
  }
}

// Q6_K: 128 bytes low nibbles (ql), 64 bytes high 2-bit pairs (qh), 16 int8 scales, f16 d. Each half
// of 128 elements uses 64 ql bytes and 32 qh bytes; element r of a half takes nibble r/64 of
// ql[r%64] and bit pair r/32 of qh[r%32]; q is 6 bits minus 32; x = (d*scale[e/16]) * q.
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  float d = f16_at(b + 208);
  for (int e = 0; e < kQKK; ++e) {
    int h = e / 128, r = e % 128;
    int lo = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0f;
    int hi = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
    float ds = d * static_cast<float>(sc[e / 16]);
    y[e] = ds * static_cast<float>((lo | (hi << 4)) - 32);
  }
}

template <typename BlockFn>
void for_blocks(const uint8_t* src, int64_t n, int block_elems, int block_bytes, float* dst, BlockFn fn) {
  int64_t blocks = n / block_elems;
  for (int64_t i = 0; i < blocks; ++i) fn(src + i * block_bytes, dst + i * block_elems);
}

}  // namespace

bool gguf_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16: case GgmlType::kQ8_0:
    case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default: return false;
  }
}

void gguf_dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(type));
  CONVEYOR_CHECK(tr != nullptr && gguf_can_dequantize(type), "cannot dequantize GGML type ", ggml_type_name(type),
                 "; conveyor loads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K — requantize the model to one "
                 "of these");
  CONVEYOR_CHECK(n % tr->block_elems == 0, "dequantize ", tr->name, ": ", n, " elements is not a multiple of the block size ",
                 tr->block_elems);
  if (n == 0) return;  // empty tensors: dst may be null, and memcpy(null, p, 0) is undefined
  int be = static_cast<int>(tr->block_elems), bb = static_cast<int>(tr->block_bytes);
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_at(src + 2 * i);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8)));
      return;
    case GgmlType::kQ8_0: for_blocks(src, n, be, bb, dst, dequant_q8_0); return;
    case GgmlType::kQ4_0: for_blocks(src, n, be, bb, dst, dequant_q4_0); return;
    case GgmlType::kQ4_1: for_blocks(src, n, be, bb, dst, dequant_q4_1); return;
    case GgmlType::kQ4_K: for_blocks(src, n, be, bb, dst, dequant_q4_k); return;
    case GgmlType::kQ6_K: for_blocks(src, n, be, bb, dst, dequant_q6_k); return;
    default: break;
  }
}

}  // namespace conveyor
