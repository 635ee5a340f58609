// StepPlan wire format (see step_plan.h): [magic, step, nseqs, then per sequence: seq_id, start_pos,
// wants_logits, ntokens, tokens..., nblocks, blocks...].
#include "stages/step_plan.h"

#include <string>

#include "runtime/error.h"

namespace conveyor {

namespace {
constexpr int64_t kMagic = 0x53544550504c414eLL;  // "STEPPLAN"

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
  bool at_end() const { return pos_ == w_.size(); }
  size_t pos() const { return pos_; }

 private:
  const std::vector<int64_t>& w_;
  size_t pos_ = 0;
};
}  // namespace

std::vector<int64_t> StepPlan::encode() const {
  std::vector<int64_t> w = {kMagic, step, static_cast<int64_t>(seqs.size())};
  for (const auto& s : seqs) {
    w.insert(w.end(), {s.seq_id, s.start_pos, s.wants_logits ? 1 : 0, static_cast<int64_t>(s.tokens.size())});
    w.insert(w.end(), s.tokens.begin(), s.tokens.end());
    w.push_back(static_cast<int64_t>(s.block_table.size()));
    w.insert(w.end(), s.block_table.begin(), s.block_table.end());
  }
  return w;
}

StepPlan StepPlan::decode(const std::vector<int64_t>& words) {
  Reader r(words);
  CONVEYOR_CHECK(r.next("magic") == kMagic, "step plan: bad magic (not a StepPlan, or the stages disagree)");
  StepPlan p;
  p.step = r.next("step");
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
  }
  CONVEYOR_CHECK(r.at_end(), "step plan: ", words.size() - r.pos(), " words left after the last sequence");
  return p;
}

}  // namespace conveyor
