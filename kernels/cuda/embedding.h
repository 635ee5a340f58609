// Token embedding lookup on the GPU, the twin of kernels/cpu/embedding.h. A vocab-parallel rank holds
// rows [vocab_start, vocab_start + vocab_size) of the table and writes zeros for other ids, so a sum
// over the TP group gives the full embedding. Enqueue only; device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace conveyor {

// out[t, :] = table[ids[t] - vocab_start, :] when vocab_start <= ids[t] < vocab_start + vocab_size,
// else zeros. Ids are not validated on the device (the scheduler checks them against the full
// vocabulary on the host). dt: kBF16, kF16 or kF32 (table and out).
void embedding_cuda(void* out,             // [tokens, hidden]
                    const void* table,     // [vocab_size, hidden]
                    const int32_t* ids,    // [tokens]
                    int64_t tokens, int64_t hidden, int64_t vocab_start, int64_t vocab_size, DType dt,
                    cudaStream_t s);

}  // namespace conveyor
