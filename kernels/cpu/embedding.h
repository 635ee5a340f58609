// Token embedding lookup, the reference twin of the CUDA gather. Supports a vocab-parallel shard:
// a rank holds rows [vocab_start, vocab_end) of the table and writes zeros for ids outside that
// range, so an all-reduce (sum) over the TP group yields the full embedding.
#pragma once

#include <cstdint>

namespace conveyor {

// out[t, :] = table[ids[t] - vocab_start, :] when vocab_start <= ids[t] < vocab_end, else zeros.
// Every id must lie in [0, vocab_size) (the whole vocabulary); an id outside it throws, naming the
// token index, because it means a bad prompt or a bad sampler, never a shard boundary.
void embedding_ref(float* out,            // [tokens, hidden]
                   const int32_t* ids,    // [tokens]
                   const float* table,    // [vocab_end - vocab_start, hidden]
                   int tokens, int hidden, int vocab_size, int vocab_start, int vocab_end);

// The unsharded case: the table holds the whole vocabulary.
inline void embedding_ref(float* out, const int32_t* ids, const float* table, int tokens, int hidden,
                          int vocab_size) {
  embedding_ref(out, ids, table, tokens, hidden, vocab_size, 0, vocab_size);
}

}  // namespace conveyor
