// e4m3 codes to f16, in registers, for the kernels that read FP8 weights or an FP8 KV cache into f16 mmas (the
// FP8 gemv, decode attention). Device code only.
#pragma once

#include <cstdint>

namespace conveyor::cuda_detail {

// Four e4m3 codes (the low byte first) as two f16x2 registers, exactly: codes 0, 1 in lo and 2, 3 in hi, the lower
// code in the lower half. One cvt.rn.f16x2.e4m3x2 per pair, the upper pair read from the register's upper half (a
// shift per pair, as `x >> 16` into the conversion compiles, is an integer op more for every two codes). sm_89+.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t codes, uint32_t& lo, uint32_t& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  __trap();  // the callers refuse devices below sm_89 before launching
#else
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(codes));
#endif
}

}  // namespace conveyor::cuda_detail
