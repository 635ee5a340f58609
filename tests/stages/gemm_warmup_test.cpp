// runtime.gemm_warmup: the rows the start-up warm-up runs each GEMM shape at (kernels/gemm_tuning.h),
// and StageModel::warm_up_gemms on the CPU twin behind an Ops that says it tunes on first use: every
// layer shape (q|k|v, o, gate|up, down: the op the forward uses, linear or linear_add) and the LM head
// at every row count, each GEMM bucket of the run covered, and the model's state untouched (a warmed
// model's greedy run equals an unwarmed one's logit for logit). A backend that does not tune makes no
// call. The schedule simulator's side (no first-use charge after a warm-up) is in
// tests/stages/sim/schedule_sim_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/gemm_tuning.h"
#include "runtime/model/spec.h"
#include "stages/cpu_ops.h"
#include "tests/stages/forwarding_ops.h"
#include "tests/stages/model_driver.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

TEST(GemmWarmupRows, DecodeBucketsThenOnePerPowerOfTwoUpToTheLimit) {
  using R = std::vector<int64_t>;
  EXPECT_EQ(gemm_warmup_rows(0), R{});
  EXPECT_EQ(gemm_warmup_rows(1), R{1});
  EXPECT_EQ(gemm_warmup_rows(10), (R{1, 2, 4, 8}));
  EXPECT_EQ(gemm_warmup_rows(16), (R{1, 2, 4, 8, 16}));
  EXPECT_EQ(gemm_warmup_rows(17), (R{1, 2, 4, 8, 16, 17}));
  EXPECT_EQ(gemm_warmup_rows(64), (R{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(gemm_warmup_rows(5000), (R{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 5000}));
  // Every m a step may have above 16 shares its tuning bucket with a warmed row.
  for (int64_t max_rows : {17, 100, 8192, 5000}) {
    std::set<int64_t> warmed;
    for (int64_t r : gemm_warmup_rows(max_rows)) warmed.insert(gemm_tuning_bucket(r));
    for (int64_t m = kGemmExactTuningRows + 1; m <= max_rows; ++m)
      ASSERT_TRUE(warmed.count(gemm_tuning_bucket(m))) << "m = " << m << " of max " << max_rows;
  }
}

struct Call {
  std::string op;
  int64_t rows, n, k;
  DType out;
  bool operator<(const Call& o) const { return std::tie(op, rows, n, k, out) < std::tie(o.op, o.rows, o.n, o.k, o.out); }
  bool operator==(const Call& o) const { return std::tie(op, rows, n, k, out) == std::tie(o.op, o.rows, o.n, o.k, o.out); }
};

void PrintTo(const Call& c, std::ostream* os) { *os << c.op << "(m=" << c.rows << ", n=" << c.n << ", k=" << c.k << ")"; }

// The CPU twin, recording every GEMM and saying it tunes on first use (as CudaOps does).
class TuningOps : public testing::ForwardingOps {
 public:
  explicit TuningOps(std::vector<Call>* calls) : calls_(calls) {}
  bool tunes_on_first_use() const override { return true; }
  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    calls_->push_back(Call{"linear", x.rows, w.rows, w.cols, out.dtype});
    ForwardingOps::linear(out, x, w, bias);
  }
  void linear_add(const TensorView& out, const TensorView& x, const TensorView& w) override {
    calls_->push_back(Call{"linear_add", x.rows, w.rows, w.cols, out.dtype});
    ForwardingOps::linear_add(out, x, w);
  }

 private:
  std::vector<Call>* calls_;
};

std::vector<testing::GreedyRun> greedy(testing::ModelDriver& driver) {
  return testing::greedy_alone(driver, {{1, 5, 9, 2, 7}, {3, 8}}, 8);
}

TEST(StageModelWarmup, EveryShapeAtEveryRowCountAndNothingElse) {
  const std::string dir = testing::data_path("goldens/llama3_rope");
  const ModelSpec spec = load_model_spec(dir);
  std::vector<Call> calls;
  testing::ModelDriver driver(spec, dir, std::make_unique<TuningOps>(&calls));
  const int64_t made = driver.warm_up_gemms(40, 6);
  const int64_t hidden = spec.hidden, q = spec.heads * spec.head_dim, kv = spec.kv_heads * spec.head_dim;
  std::multiset<Call> want;
  for (int64_t m : {1, 2, 4, 8, 16, 32, 40}) {
    want.insert({"linear", m, q + 2 * kv, hidden, DType::kF32});
    want.insert({"linear_add", m, hidden, q, DType::kF32});
    want.insert({"linear", m, 2 * spec.intermediate, hidden, DType::kF32});
    want.insert({"linear_add", m, hidden, spec.intermediate, DType::kF32});
  }
  for (int64_t m : {1, 2, 4}) want.insert({"linear", m, spec.vocab, hidden, DType::kF32});
  EXPECT_EQ(made, static_cast<int64_t>(want.size()));
  EXPECT_EQ(std::multiset<Call>(calls.begin(), calls.end()), want);

  // The warm-up leaves nothing behind: the warmed model's greedy run is the unwarmed one's.
  std::vector<Call> other;
  testing::ModelDriver cold(spec, dir, std::make_unique<TuningOps>(&other));
  const auto warm_run = greedy(driver);
  const auto cold_run = greedy(cold);
  ASSERT_EQ(warm_run.size(), cold_run.size());
  for (size_t p = 0; p < warm_run.size(); ++p) {
    EXPECT_EQ(warm_run[p].tokens.size(), 8u);
    EXPECT_EQ(warm_run[p].tokens, cold_run[p].tokens);
    ASSERT_EQ(warm_run[p].logits.size(), cold_run[p].logits.size());
    for (size_t t = 0; t < warm_run[p].logits.size(); ++t)
      EXPECT_EQ(warm_run[p].logits[t], cold_run[p].logits[t]) << "prompt " << p << " token " << t;
  }
}

TEST(StageModelWarmup, ABackendThatDoesNotTuneIsLeftAlone) {
  const std::string dir = testing::data_path("goldens/llama3_rope");
  testing::ModelDriver driver(load_model_spec(dir), dir, make_cpu_ops());
  EXPECT_EQ(driver.warm_up_gemms(8192, 256), 0);
}

}  // namespace
}  // namespace conveyor
