// Prompt scoring: which rows of each scheduled chunk are scored (chunked prefill, a first scored
// token, recompute after preemption), and scored plans and results survive the wire format.
#include "runtime/engine/prompt_scoring.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

SeqChunk chunk_of(const std::vector<int32_t>& prompt, int32_t start, int32_t n) {
  SeqChunk c;
  c.seq_id = 7;
  c.start_pos = start;
  c.tokens.assign(prompt.begin() + start, prompt.begin() + start + n);
  return c;
}

std::vector<int32_t> random_prompt(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 49152);
  return p;
}

TEST(PromptScoring, ChunksCoverEveryPositionOnceAndNameTheNextToken) {
  const std::vector<int32_t> prompt = random_prompt(10, 1);
  const PromptScoring s{true, 3, false, 1};
  int32_t next = s.first - 1;
  SeqChunk a = chunk_of(prompt, 0, 4);
  assign_chunk_scoring(s, prompt, &next, &a);
  EXPECT_EQ(a.score.first_row, 0);
  EXPECT_EQ(a.score.rows, 4);
  EXPECT_EQ(a.score.next_token, prompt[4]);  // the last row predicts the next chunk's first token
  EXPECT_EQ(a.score.top, 3);
  SeqChunk b = chunk_of(prompt, 4, 6);
  assign_chunk_scoring(s, prompt, &next, &b);
  EXPECT_EQ(b.score.first_row, 0);
  EXPECT_EQ(b.score.rows, 5);  // the last prompt position samples, it is not scored
  EXPECT_EQ(b.score.next_token, -1);
  EXPECT_EQ(next, 9);
  // A recompute after preemption covers the prompt again; nothing is scored twice.
  SeqChunk again = chunk_of(prompt, 0, 10);
  assign_chunk_scoring(s, prompt, &next, &again);
  EXPECT_EQ(again.score.rows, 0);
}

TEST(PromptScoring, FirstScoredTokenSkipsTheFirstHalf) {
  const std::vector<int32_t> prompt = random_prompt(12, 2);
  const PromptScoring s{true, 0, true, 7};  // perplexity at ctx 12: tokens 7..11, logits at 6..10
  int32_t next = s.first - 1;
  SeqChunk a = chunk_of(prompt, 0, 5);
  assign_chunk_scoring(s, prompt, &next, &a);
  EXPECT_EQ(a.score.rows, 0);
  SeqChunk b = chunk_of(prompt, 5, 7);
  assign_chunk_scoring(s, prompt, &next, &b);
  EXPECT_EQ(b.score.first_row, 1);
  EXPECT_EQ(b.score.rows, 5);
  EXPECT_TRUE(b.score.full);
  EXPECT_THROW(validate_prompt_scoring(PromptScoring{true, 21, false, 1}, "r"), Error);
  EXPECT_THROW(validate_prompt_scoring(PromptScoring{true, 1, false, 0}, "r"), Error);
}

TEST(PromptScoring, ScoredPlansAndResultsRoundTrip) {
  const std::vector<int32_t> prompt = random_prompt(20, 3);
  StepPlan p;
  p.step = 5;
  p.seqs.push_back(chunk_of(prompt, 0, 8));
  p.seqs[0].block_table = {0, 1};
  p.seqs[0].score = ChunkScoring{2, 6, prompt[8], 4, true};
  const StepPlan q = StepPlan::decode(p.encode());
  EXPECT_EQ(q.seqs[0].score.first_row, 2);
  EXPECT_EQ(q.seqs[0].score.rows, 6);
  EXPECT_EQ(q.seqs[0].score.next_token, prompt[8]);
  EXPECT_EQ(q.seqs[0].score.top, 4);
  EXPECT_TRUE(q.seqs[0].score.full);
  EXPECT_EQ(q.num_score_rows(), 6u);
  p.seqs[0].score.next_token = -1;  // the chunk's last row needs the next token
  EXPECT_THROW(StepPlan::decode(p.encode()), Error);

  std::mt19937_64 rng(4);
  std::uniform_real_distribution<float> u(-20.f, 0.f);
  StepResult r;
  r.step = 5;
  PromptScores s;
  s.seq_id = 7;
  s.first_pos = 2;
  for (int i = 0; i < 3; ++i) s.rows.push_back({static_cast<int32_t>(rng() % 100), u(rng), 3, {{1, u(rng)}, {2, u(rng)}}});
  for (int i = 0; i < 3 * 7; ++i) s.full.push_back(u(rng));  // odd count: the last word holds one float
  r.scores.push_back(s);
  const std::vector<int64_t> words = r.encode();
  const StepResult back = StepResult::decode(words);
  ASSERT_EQ(back.scores.size(), 1u);
  EXPECT_EQ(back.scores[0].first_pos, 2);
  EXPECT_EQ(back.scores[0].full, s.full);
  ASSERT_EQ(back.scores[0].rows.size(), 3u);
  EXPECT_EQ(back.scores[0].rows[1].logprob, s.rows[1].logprob);
  EXPECT_EQ(back.scores[0].rows[2].top[1].token, 2);
  for (size_t cut = 1; cut < words.size(); cut += 3) {
    std::vector<int64_t> w(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(StepResult::decode(w), Error) << "truncated at " << cut;
  }
}

}  // namespace
}  // namespace conveyor
