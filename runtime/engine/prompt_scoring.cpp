// Prompt scoring (see prompt_scoring.h).
#include "runtime/engine/prompt_scoring.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace conveyor {

void validate_prompt_scoring(const PromptScoring& s, const std::string& who) {
  if (!s.on) return;
  CONVEYOR_CHECK(s.top >= 0 && s.top <= kMaxLogprobs, who, ": prompt_logprobs must be in [0, ", kMaxLogprobs, "], got ",
                 s.top);
  CONVEYOR_CHECK(s.first >= 1, who, ": the first scored prompt token must be >= 1 (token 0 has no context), got ",
                 s.first);
}

void assign_chunk_scoring(const PromptScoring& s, const std::vector<int32_t>& prompt, int32_t* next_pos,
                          SeqChunk* chunk) {
  chunk->score = ChunkScoring{};
  if (!s.on) return;
  const int32_t begin = chunk->start_pos;
  const int32_t end = begin + static_cast<int32_t>(chunk->tokens.size());
  const int32_t lo = std::max({begin, *next_pos, s.first - 1});
  const int32_t hi = std::min(end, static_cast<int32_t>(prompt.size()) - 1);
  if (lo >= hi) return;
  chunk->score.first_row = lo - begin;
  chunk->score.rows = hi - lo;
  chunk->score.next_token = hi == end ? prompt[static_cast<size_t>(end)] : -1;
  chunk->score.top = s.top;
  chunk->score.full = s.full;
  *next_pos = hi;
}

}  // namespace conveyor
