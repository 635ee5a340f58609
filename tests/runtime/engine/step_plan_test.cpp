// StepPlan wire format: random plans survive encode/decode exactly; every truncation and corruption of a
// buffer is an Error, never a crash.
#include "runtime/engine/step_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

StepPlan random_plan(std::mt19937_64& rng) {
  StepPlan p;
  p.step = static_cast<int64_t>(rng() % 100000);
  size_t n = 1 + rng() % 6;
  for (size_t i = 0; i < n; ++i) {
    SeqChunk s;
    s.seq_id = static_cast<int64_t>(rng() % 1000) + 1;
    s.start_pos = static_cast<int32_t>(rng() % 4000);
    s.wants_logits = rng() % 2;
    for (size_t t = 0, k = 1 + rng() % 40; t < k; ++t) s.tokens.push_back(static_cast<int32_t>(rng() % 128256));
    for (size_t b = 0, k = 1 + rng() % 20; b < k; ++b) s.block_table.push_back(static_cast<int32_t>(rng() % 5000));
    p.seqs.push_back(s);
  }
  return p;
}

TEST(StepPlan, RoundTrip) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    StepPlan p = random_plan(rng);
    StepPlan q = StepPlan::decode(p.encode());
    ASSERT_EQ(q.step, p.step);
    ASSERT_EQ(q.seqs.size(), p.seqs.size());
    for (size_t i = 0; i < p.seqs.size(); ++i) {
      EXPECT_EQ(q.seqs[i].seq_id, p.seqs[i].seq_id);
      EXPECT_EQ(q.seqs[i].start_pos, p.seqs[i].start_pos);
      EXPECT_EQ(q.seqs[i].wants_logits, p.seqs[i].wants_logits);
      EXPECT_EQ(q.seqs[i].tokens, p.seqs[i].tokens);
      EXPECT_EQ(q.seqs[i].block_table, p.seqs[i].block_table);
    }
    EXPECT_EQ(q.num_tokens(), p.num_tokens());
    EXPECT_EQ(q.num_logits(), p.num_logits());
  }
}

TEST(StepPlan, MalformedBuffersAreErrors) {
  std::mt19937_64 rng(12);
  std::vector<int64_t> w = random_plan(rng).encode();
  for (size_t len = 0; len < w.size(); ++len) {
    std::vector<int64_t> cut(w.begin(), w.begin() + static_cast<long>(len));
    EXPECT_THROW(StepPlan::decode(cut), Error) << "truncated to " << len;
  }
  std::vector<int64_t> extra = w;
  extra.push_back(7);
  EXPECT_THROW(StepPlan::decode(extra), Error);
  for (size_t i = 0; i < w.size(); ++i) {
    for (int64_t bad : {int64_t(-1), int64_t(1) << 40}) {
      std::vector<int64_t> c = w;
      c[i] = bad;
      try {
        StepPlan::decode(c);  // may decode (a changed token id) but must never crash
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace conveyor
