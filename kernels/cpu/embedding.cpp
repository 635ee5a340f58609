// Token embedding lookup (see embedding.h). Rows are copied, so the result is bit-exact.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "runtime/core/error.h"

namespace conveyor {

void embedding_ref(float* out, const int32_t* ids, const float* table, int tokens, int hidden, int vocab_size,
                   int vocab_start, int vocab_end) {
  CONVEYOR_CHECK(tokens >= 0 && hidden > 0, "embedding: bad shape tokens=", tokens, " hidden=", hidden);
  CONVEYOR_CHECK(0 <= vocab_start && vocab_start <= vocab_end && vocab_end <= vocab_size,
                 "embedding: shard [", vocab_start, ", ", vocab_end, ") is not inside the vocabulary of ",
                 vocab_size, " tokens");
  for (int t = 0; t < tokens; ++t) {
    CONVEYOR_CHECK(ids[t] >= 0 && ids[t] < vocab_size, "embedding: token id ", ids[t], " at index ", t,
                   " is outside the vocabulary [0, ", vocab_size, "); check the prompt's token ids");
  }
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(hidden);
#pragma omp parallel for schedule(static) if (tokens > 16)
  for (int t = 0; t < tokens; ++t) {
    float* dst = out + static_cast<size_t>(t) * hidden;
    const int32_t id = ids[t];
    if (id >= vocab_start && id < vocab_end) {
      std::memcpy(dst, table + static_cast<size_t>(id - vocab_start) * hidden, row_bytes);
    } else {
      std::fill(dst, dst + hidden, 0.f);
    }
  }
}

}  // namespace conveyor
