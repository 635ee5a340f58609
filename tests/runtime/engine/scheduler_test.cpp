// Scheduler tests against the fake paged runner with greedy sampling: batching limits, chunked prefill
// budgets, preemption by recompute (same tokens as with ample blocks), sequences that can never fit,
// and plans kept in flight (issue 5's micro-batches) giving the same tokens as one plan at a time.
#include "runtime/engine/scheduler.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>

#include "runtime/sampling/sampler.h"
#include "tests/runtime/engine/fake_model_runner.h"

namespace conveyor {
namespace {

using testing::FakeModelRunner;
constexpr int64_t kVocab = 97;

struct Job {
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

std::vector<Job> random_jobs(int n, uint64_t seed, int max_prompt, int max_out) {
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j;
    int len = 1 + static_cast<int>(rng() % max_prompt);
    for (int k = 0; k < len; ++k) j.prompt.push_back(static_cast<int32_t>(rng() % kVocab));
    j.max_tokens = 1 + static_cast<int64_t>(rng() % max_out);
    jobs.push_back(j);
  }
  return jobs;
}

struct RunResult {
  std::map<int64_t, std::vector<int32_t>> outputs;
  std::vector<FailedSequence> failed;
  SchedulerStats stats;
  std::vector<StepPlan> plans;
};

// Drives the scheduler with up to `depth` plans in flight: forward runs when a plan is made, its
// result is handed back only when the pipe is full or nothing else can be scheduled.
RunResult run_greedy(const SchedulerConfig& cfg, int num_blocks, int block_size, const std::vector<Job>& jobs,
                     int depth = 1) {
  FakeModelRunner runner(kVocab, num_blocks, block_size);
  Scheduler sched(cfg, num_blocks, block_size);
  std::map<int64_t, int64_t> max_tokens;
  for (size_t i = 0; i < jobs.size(); ++i) {
    sched.add(static_cast<int64_t>(i), jobs[i].prompt,
              static_cast<int64_t>(jobs[i].prompt.size()) + jobs[i].max_tokens);
    max_tokens[static_cast<int64_t>(i)] = jobs[i].max_tokens;
  }
  RunResult res;
  res.failed = sched.take_failed();
  std::deque<std::pair<StepPlan, std::vector<int32_t>>> pipe;
  for (int guard = 0; sched.has_unfinished(); ++guard) {
    EXPECT_LT(guard, 100000) << "scheduler does not make progress";
    if (guard >= 100000) break;
    StepPlan plan;
    if (static_cast<int>(pipe.size()) < depth) plan = sched.schedule();
    if (!plan.seqs.empty()) {
      std::vector<float> logits;
      runner.forward(plan, &logits);
      std::vector<int32_t> sampled;
      for (size_t r = 0; r < plan.num_logits(); ++r) {
        std::vector<float> row(logits.begin() + r * kVocab, logits.begin() + (r + 1) * kVocab);
        sampled.push_back(argmax_token(row));
      }
      pipe.emplace_back(std::move(plan), std::move(sampled));
      continue;
    }
    EXPECT_FALSE(pipe.empty()) << "nothing in flight and nothing scheduled";
    if (pipe.empty()) break;
    auto [done, sampled] = std::move(pipe.front());
    pipe.pop_front();
    sched.on_step_done(done, sampled);
    EXPECT_EQ(sched.num_plans_in_flight(), static_cast<int>(pipe.size()));
    for (const SeqChunk& c : done.seqs) {
      const Sequence& s = sched.sequence(c.seq_id);
      if (static_cast<int64_t>(s.output_ids.size()) == max_tokens[c.seq_id]) {
        res.outputs[c.seq_id] = s.output_ids;
        sched.finish(c.seq_id);
      }
    }
  }
  res.stats = sched.stats();
  res.plans = runner.plans();
  EXPECT_EQ(sched.allocator().free_count(), num_blocks) << "blocks leaked";
  return res;
}

SchedulerConfig make_cfg(int64_t seqs, int64_t tokens, bool chunked = true) {
  SchedulerConfig c;
  c.max_num_seqs = seqs;
  c.max_num_batched_tokens = tokens;
  c.enable_chunked_prefill = chunked;
  return c;
}

TEST(Scheduler, RespectsSeqAndTokenLimitsAndBatchesContinuously) {
  const auto jobs = random_jobs(12, 1, 40, 20);
  RunResult r = run_greedy(make_cfg(3, 48), 256, 16, jobs);
  ASSERT_EQ(r.outputs.size(), jobs.size());
  bool mixed = false;
  for (const StepPlan& p : r.plans) {
    EXPECT_LE(p.seqs.size(), 3u) << "step " << p.step;
    EXPECT_LE(p.num_tokens(), 48u) << "step " << p.step;
    bool has_decode = false, has_prefill = false;
    for (const SeqChunk& c : p.seqs) (c.tokens.size() == 1 && c.start_pos > 0 ? has_decode : has_prefill) = true;
    mixed |= has_decode && has_prefill;
  }
  EXPECT_TRUE(mixed) << "no step mixed decodes with a new sequence's prefill";
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(r.outputs[i].size(), static_cast<size_t>(jobs[i].max_tokens));
}

TEST(Scheduler, ChunkedPrefillSplitsLongPromptAndDecodesGoFirst) {
  std::vector<Job> jobs = random_jobs(2, 2, 2, 1);
  jobs[0].prompt.resize(3, 5);
  jobs[0].max_tokens = 30;
  jobs[1].prompt = random_jobs(1, 3, 1, 1)[0].prompt;
  jobs[1].prompt.resize(100, 7);
  jobs[1].max_tokens = 2;
  SchedulerConfig cfg = make_cfg(8, 32);
  FakeModelRunner runner(kVocab, 64, 16);
  Scheduler sched(cfg, 64, 16);
  sched.add(0, jobs[0].prompt, 40);
  StepPlan p0 = sched.schedule();  // the short prompt alone
  ASSERT_EQ(p0.seqs.size(), 1u);
  sched.on_step_done(p0, {11});
  sched.add(1, jobs[1].prompt, 110);
  std::vector<size_t> chunks;
  for (int step = 0; step < 4; ++step) {
    StepPlan p = sched.schedule();
    ASSERT_EQ(p.seqs.size(), 2u) << "step " << step;
    EXPECT_EQ(p.seqs[0].seq_id, 0) << "the decode comes first";
    EXPECT_EQ(p.seqs[0].tokens.size(), 1u);
    EXPECT_EQ(p.seqs[1].seq_id, 1);
    EXPECT_EQ(p.seqs[1].start_pos, static_cast<int32_t>(31 * step));
    EXPECT_EQ(p.seqs[1].wants_logits, step == 3);
    EXPECT_EQ(p.seqs[1].block_table.size(), (p.seqs[1].start_pos + p.seqs[1].tokens.size() + 15) / 16);
    EXPECT_LE(p.num_tokens(), 32u);
    chunks.push_back(p.seqs[1].tokens.size());
    std::vector<int32_t> sampled{20};
    if (p.seqs[1].wants_logits) sampled.push_back(21);
    sched.on_step_done(p, sampled);
  }
  EXPECT_EQ(chunks, (std::vector<size_t>{31, 31, 31, 7}));
  EXPECT_EQ(sched.sequence(1).output_ids, std::vector<int32_t>{21});
  EXPECT_EQ(sched.sequence(1).num_computed, 100);
}

TEST(Scheduler, PreemptionWithFewBlocksGivesSameTokens) {
  const auto jobs = random_jobs(20, 4, 60, 50);
  RunResult ample = run_greedy(make_cfg(16, 256), 1024, 8, jobs);
  // Enough for the longest sequence alone (110 tokens / 8), far too few for 16 at once.
  RunResult tight = run_greedy(make_cfg(16, 256), 16, 8, jobs);
  EXPECT_EQ(ample.stats.preemptions, 0);
  EXPECT_GT(tight.stats.preemptions, 0);
  ASSERT_EQ(tight.outputs.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(tight.outputs[i], ample.outputs[i]) << "request " << i;
  // Not chunked either: recompute of prompt + outputs in one step.
  RunResult whole = run_greedy(make_cfg(16, 256, false), 16, 8, jobs);
  EXPECT_GT(whole.stats.preemptions, 0);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(whole.outputs[i], ample.outputs[i]) << "request " << i;
}

TEST(Scheduler, SequenceThatCanNeverFitFailsWithClearError) {
  std::vector<Job> jobs = random_jobs(3, 5, 10, 5);
  jobs[1].prompt.resize(60, 3);
  jobs[1].max_tokens = 10;  // 70 tokens = 9 blocks of 8 > 8 blocks
  RunResult r = run_greedy(make_cfg(4, 64), 8, 8, jobs);
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].id, 1);
  EXPECT_NE(r.failed[0].error.find("needs 9 KV blocks of 8 tokens, but the cache has only 8"), std::string::npos)
      << r.failed[0].error;
  EXPECT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.stats.failed, 1);

  RunResult nochunk = run_greedy(make_cfg(4, 32, false), 64, 8, jobs);
  ASSERT_EQ(nochunk.failed.size(), 1u);
  EXPECT_NE(nochunk.failed[0].error.find("enable scheduler.enable_chunked_prefill"), std::string::npos)
      << nochunk.failed[0].error;
}

TEST(Scheduler, SequencesInFlightAreNotScheduledAgain) {
  Scheduler sched(make_cfg(8, 64), 64, 16);
  sched.add(0, {1, 2, 3}, 20);
  sched.add(1, {4, 5}, 20);
  StepPlan a = sched.schedule();
  ASSERT_EQ(a.seqs.size(), 2u);
  sched.add(2, {6, 7, 8, 9}, 20);
  StepPlan b = sched.schedule();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].seq_id, 2);
  EXPECT_TRUE(sched.schedule().seqs.empty()) << "everything is in flight";
  EXPECT_EQ(sched.num_plans_in_flight(), 2);
  EXPECT_THROW(sched.finish(0), Error);
  sched.on_step_done(a, {10, 11});
  StepPlan c = sched.schedule();
  ASSERT_EQ(c.seqs.size(), 2u);
  EXPECT_EQ(c.seqs[0].tokens, std::vector<int32_t>{10});
  EXPECT_EQ(c.seqs[0].start_pos, 3);
  EXPECT_EQ(c.seqs[1].tokens, std::vector<int32_t>{11});
  EXPECT_THROW(sched.on_step_done(b, {}), Error) << "a result with the wrong token count is refused";
}

TEST(Scheduler, SeveralPlansInFlightGiveSameTokens) {
  const auto jobs = random_jobs(16, 6, 50, 40);
  RunResult one = run_greedy(make_cfg(6, 64), 24, 8, jobs, 1);
  for (int depth : {2, 4}) {
    RunResult piped = run_greedy(make_cfg(6, 64), 24, 8, jobs, depth);
    ASSERT_EQ(piped.outputs.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(piped.outputs[i], one.outputs[i]) << "depth " << depth;
    for (size_t p = 0; p + 1 < piped.plans.size(); ++p) EXPECT_LE(piped.plans[p].seqs.size(), 6u);
  }
}

}  // namespace
}  // namespace conveyor
