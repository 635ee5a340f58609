// StepPlan wire format (see step_plan.h): [magic, step, shutdown, nseqs, then per sequence: seq_id,
// start_pos, wants_logits, ntokens, tokens..., nblocks, blocks..., score rows (then, when > 0,
// first_row, next_token, top, full); nnew, then per new sequence: seq_id,
// seed, the sampler's parameters (doubles as their bits), nstop, stop ids..., nprompt, prompt...;
// nretired, ids...; neos, ids...]. StepResult: [magic, step, n, then per sample: token, has_logprobs,
// logprob bits, rank, ntop, (token, logprob bits)...; nscores, then per score: seq_id, first_pos,
// nrows, rows as samples are, nfull, ceil(nfull / 2) words of two floats each].
#include "runtime/engine/step_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/core/error.h"

namespace conveyor {

namespace {
constexpr int64_t kMagic = 0x53544550504c414eLL;        // "STEPPLAN"
constexpr int64_t kResultMagic = 0x53544550524553LL;    // "STEPRES"

int64_t bits_of(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
double double_of(int64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

class Reader {
 public:
  explicit Reader(const std::vector<int64_t>& w) : w_(w) {}
  int64_t next(const char* field) {
    CONVEYOR_CHECK(pos_ < w_.size(), "step plan truncated: no word left for ", field, " at word ", pos_, " of ",
                   w_.size());
    return w_[pos_++];
  }
  // A count of int32 items that must still fit in the buffer.
  size_t count(const char* field) {
    int64_t n = next(field);
    CONVEYOR_CHECK(n >= 0 && static_cast<uint64_t>(n) <= w_.size() - pos_, "step plan: ", field, " ", n,
                   " exceeds the ", w_.size() - pos_, " words left");
    return static_cast<size_t>(n);
  }
  std::vector<int32_t> ints(const char* field) {
    size_t n = count(field);
    std::vector<int32_t> out(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t v = w_[pos_++];
      CONVEYOR_CHECK(v >= INT32_MIN && v <= INT32_MAX, "step plan: ", field, " value ", v, " is not an int32");
      out[i] = static_cast<int32_t>(v);
    }
    return out;
  }
  int64_t ranged(const char* field, int64_t lo, int64_t hi) {
    int64_t v = next(field);
    CONVEYOR_CHECK(v >= lo && v <= hi, "step plan: ", field, " ", v, " is outside [", lo, ", ", hi, "]");
    return v;
  }
  void skip(size_t n) { pos_ += n; }
  bool at_end() const { return pos_ == w_.size(); }
  size_t pos() const { return pos_; }

 private:
  const std::vector<int64_t>& w_;
  size_t pos_ = 0;
};
}  // namespace

namespace {

void put_ints(std::vector<int64_t>& w, const std::vector<int32_t>& v) {
  w.push_back(static_cast<int64_t>(v.size()));
  w.insert(w.end(), v.begin(), v.end());
}

void encode_new_sequence(std::vector<int64_t>& w, const NewSequence& n) {
  const SamplingParams& p = n.params;
  w.insert(w.end(), {n.seq_id, static_cast<int64_t>(n.seed), bits_of(p.temperature), bits_of(p.top_p), p.top_k,
                     bits_of(p.min_p), bits_of(p.repetition_penalty), bits_of(p.presence_penalty),
                     bits_of(p.frequency_penalty), p.min_tokens, p.ignore_eos ? 1 : 0, p.logprobs ? *p.logprobs : -1});
  put_ints(w, p.stop_token_ids);
  put_ints(w, n.prompt_ids);
}

NewSequence decode_new_sequence(Reader& r) {
  NewSequence n;
  n.seq_id = r.next("new sequence id");
  n.seed = static_cast<uint64_t>(r.next("seed"));
  SamplingParams& p = n.params;
  p.temperature = double_of(r.next("temperature"));
  p.top_p = double_of(r.next("top_p"));
  p.top_k = r.next("top_k");
  p.min_p = double_of(r.next("min_p"));
  p.repetition_penalty = double_of(r.next("repetition_penalty"));
  p.presence_penalty = double_of(r.next("presence_penalty"));
  p.frequency_penalty = double_of(r.next("frequency_penalty"));
  p.min_tokens = r.ranged("min_tokens", 0, INT32_MAX);
  p.max_tokens = std::max<int64_t>(1, p.min_tokens);  // the leader stops sequences; validate() wants min <= max
  p.ignore_eos = r.ranged("ignore_eos", 0, 1) == 1;
  const int64_t logprobs = r.ranged("logprobs", -1, kMaxLogprobs);
  if (logprobs >= 0) p.logprobs = logprobs;
  p.stop_token_ids = r.ints("stop id count");
  n.prompt_ids = r.ints("prompt length");
  if (auto bad = p.first_violation()) CONVEYOR_THROW("step plan: sequence ", n.seq_id, ": ", bad->message);
  return n;
}

ChunkScoring decode_scoring(Reader& r, int64_t ntokens) {
  ChunkScoring c;
  c.rows = static_cast<int32_t>(r.ranged("score rows", 0, ntokens));
  if (c.rows == 0) return c;
  c.first_row = static_cast<int32_t>(r.ranged("score first row", 0, ntokens - c.rows));
  const bool ends_chunk = c.first_row + c.rows == ntokens;
  c.next_token = static_cast<int32_t>(r.ranged("score next token", ends_chunk ? 0 : -1, INT32_MAX));
  c.top = static_cast<int32_t>(r.ranged("score top", 0, kMaxLogprobs));
  c.full = r.ranged("score full", 0, 1) == 1;
  return c;
}

void encode_logprobs(std::vector<int64_t>& w, const TokenLogprobs& lp) {
  w.insert(w.end(), {lp.token, bits_of(lp.logprob), lp.rank, static_cast<int64_t>(lp.top.size())});
  for (const TokenLogprob& t : lp.top) w.insert(w.end(), {t.token, bits_of(t.logprob)});
}

TokenLogprobs decode_logprobs(Reader& r) {
  TokenLogprobs lp;
  lp.token = static_cast<int32_t>(r.ranged("scored token", 0, INT32_MAX));
  lp.logprob = static_cast<float>(double_of(r.next("scored logprob")));
  lp.rank = r.next("scored rank");
  lp.top.resize(r.ranged("scored top count", 0, kMaxLogprobs));
  for (TokenLogprob& t : lp.top) {
    t.token = static_cast<int32_t>(r.ranged("scored top token", 0, INT32_MAX));
    t.logprob = static_cast<float>(double_of(r.next("scored top logprob")));
  }
  return lp;
}

void encode_scores(std::vector<int64_t>& w, const PromptScores& s) {
  w.insert(w.end(), {s.seq_id, s.first_pos, static_cast<int64_t>(s.rows.size())});
  for (const TokenLogprobs& lp : s.rows) encode_logprobs(w, lp);
  w.push_back(static_cast<int64_t>(s.full.size()));
  const size_t base = w.size();
  w.resize(base + (s.full.size() + 1) / 2, 0);
  std::memcpy(w.data() + base, s.full.data(), s.full.size() * sizeof(float));
}

PromptScores decode_scores(Reader& r, const std::vector<int64_t>& words) {
  PromptScores s;
  s.seq_id = r.next("scored sequence id");
  s.first_pos = static_cast<int32_t>(r.ranged("scored first position", 0, INT32_MAX));
  s.rows.resize(r.count("scored rows"));
  for (TokenLogprobs& lp : s.rows) lp = decode_logprobs(r);
  const int64_t nfull = r.ranged("full log-softmax count", 0, int64_t{1} << 40);
  const size_t nwords = static_cast<size_t>((nfull + 1) / 2);
  CONVEYOR_CHECK(nwords <= words.size() - r.pos(), "step result: ", nfull, " full log-softmax values exceed the ",
                 words.size() - r.pos(), " words left");
  s.full.resize(static_cast<size_t>(nfull));
  std::memcpy(s.full.data(), words.data() + r.pos(), s.full.size() * sizeof(float));
  r.skip(nwords);
  return s;
}

}  // namespace

std::vector<int64_t> StepPlan::encode() const {
  std::vector<int64_t> w = {kMagic, step, shutdown ? 1 : 0, static_cast<int64_t>(seqs.size())};
  for (const auto& s : seqs) {
    w.insert(w.end(), {s.seq_id, s.start_pos, s.wants_logits ? 1 : 0, static_cast<int64_t>(s.tokens.size())});
    w.insert(w.end(), s.tokens.begin(), s.tokens.end());
    w.push_back(static_cast<int64_t>(s.block_table.size()));
    w.insert(w.end(), s.block_table.begin(), s.block_table.end());
    w.push_back(s.score.rows);
    if (s.score.rows > 0) w.insert(w.end(), {s.score.first_row, s.score.next_token, s.score.top, s.score.full ? 1 : 0});
  }
  w.push_back(static_cast<int64_t>(new_seqs.size()));
  for (const NewSequence& n : new_seqs) encode_new_sequence(w, n);
  w.push_back(static_cast<int64_t>(retired.size()));
  w.insert(w.end(), retired.begin(), retired.end());
  put_ints(w, eos_ids);
  return w;
}

StepPlan StepPlan::decode(const std::vector<int64_t>& words) {
  Reader r(words);
  CONVEYOR_CHECK(r.next("magic") == kMagic, "step plan: bad magic (not a StepPlan, or the stages disagree)");
  StepPlan p;
  p.step = r.next("step");
  p.shutdown = r.ranged("shutdown", 0, 1) == 1;
  size_t n = r.count("sequence count");
  p.seqs.resize(n);
  for (auto& s : p.seqs) {
    s.seq_id = r.next("seq_id");
    int64_t start = r.next("start_pos");
    CONVEYOR_CHECK(start >= 0 && start <= INT32_MAX, "step plan: start_pos ", start, " out of range");
    s.start_pos = static_cast<int32_t>(start);
    int64_t wants = r.next("wants_logits");
    CONVEYOR_CHECK(wants == 0 || wants == 1, "step plan: wants_logits ", wants, " is not 0 or 1");
    s.wants_logits = wants == 1;
    s.tokens = r.ints("token count");
    s.block_table = r.ints("block count");
    s.score = decode_scoring(r, static_cast<int64_t>(s.tokens.size()));
  }
  p.new_seqs.resize(r.count("new sequence count"));
  for (NewSequence& ns : p.new_seqs) ns = decode_new_sequence(r);
  p.retired.resize(r.count("retired count"));
  for (int64_t& id : p.retired) id = r.next("retired id");
  p.eos_ids = r.ints("eos count");
  CONVEYOR_CHECK(r.at_end(), "step plan: ", words.size() - r.pos(), " words left after the last field");
  return p;
}

std::vector<int64_t> StepResult::encode() const {
  std::vector<int64_t> w = {kResultMagic, step, static_cast<int64_t>(samples.size())};
  for (const SampleResult& s : samples) {
    w.insert(w.end(), {s.token, s.has_logprobs ? 1 : 0, bits_of(s.logprob), s.rank, static_cast<int64_t>(s.top.size())});
    for (const TokenLogprob& t : s.top) w.insert(w.end(), {t.token, bits_of(t.logprob)});
  }
  w.push_back(static_cast<int64_t>(scores.size()));
  for (const PromptScores& s : scores) encode_scores(w, s);
  return w;
}

StepResult StepResult::decode(const std::vector<int64_t>& words) {
  Reader r(words);
  CONVEYOR_CHECK(r.next("magic") == kResultMagic, "step result: bad magic (the stages disagree on the wire format)");
  StepResult res;
  res.step = r.next("step");
  res.samples.resize(r.count("sample count"));
  for (SampleResult& s : res.samples) {
    s.token = static_cast<int32_t>(r.ranged("token", 0, INT32_MAX));
    s.has_logprobs = r.ranged("has_logprobs", 0, 1) == 1;
    s.logprob = static_cast<float>(double_of(r.next("logprob")));
    s.rank = r.next("rank");
    s.top.resize(r.ranged("top count", 0, kMaxLogprobs));
    for (TokenLogprob& t : s.top) {
      t.token = static_cast<int32_t>(r.ranged("top token", 0, INT32_MAX));
      t.logprob = static_cast<float>(double_of(r.next("top logprob")));
    }
  }
  res.scores.resize(r.count("score count"));
  for (PromptScores& s : res.scores) s = decode_scores(r, words);
  CONVEYOR_CHECK(r.at_end(), "step result: ", words.size() - r.pos(), " words left after the last sample");
  return res;
}

}  // namespace conveyor
