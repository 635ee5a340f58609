// Dequantization of GGUF tensor data to fp32 for the types conveyor loads: F32, F16, BF16, Q8_0,
// Q4_0, Q4_1, Q4_K, Q6_K (block layouts from the GGML spec). Results are bit-identical to the
// reference dequantization of the `gguf` Python package: each value is computed with the same fp32
// operations in the same order, and never with a fused multiply-add.
#pragma once

#include <cstdint>

#include "runtime/model/gguf_file.h"

namespace conveyor {

bool gguf_can_dequantize(GgmlType type);

// Dequantizes `n` elements starting at a block boundary; n must be a multiple of the block size.
// `src` holds n / block_elems blocks.
void gguf_dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst);

}  // namespace conveyor
