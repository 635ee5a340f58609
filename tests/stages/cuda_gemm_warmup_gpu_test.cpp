// runtime.gemm_warmup on a GPU: after StageModel::warm_up_gemms, the steps of a run whose GEMM rows fall
// in warmed buckets (a 24-token prefill: bucket 32; decode steps of 2 sequences through the CUDA graphs:
// bucket 2) time no cuBLASLt candidates: GemmRunner's description has the same timed shapes before and
// after them ("... (N us)"; a shape that took a warmed bucket's choice says "as timed at m=..."). And
// the warm-up itself timed each layer shape at every row count of gemm_warmup_rows.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/gemm_tuning.h"
#include "runtime/model/spec.h"
#include "stages/cuda/cuda_ops.h"
#include "tests/stages/model_driver.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

// The lines of a GEMM description that were timed themselves, as "m=... n=... k=... ...".
std::multiset<std::string> timed(const std::string& description) {
  std::multiset<std::string> out;
  std::istringstream in(description);
  for (std::string line; std::getline(in, line);)
    if (line.find(" us)") != std::string::npos) out.insert(line.substr(0, line.find(':')));
  return out;
}

TEST(GemmWarmupGpu, WarmedBucketsTimeNothingInTheRun) {
  const std::string dir = testing::data_path("goldens/llama_hd128");
  const ModelSpec spec = load_model_spec(dir);
  std::unique_ptr<Ops> owned = make_cuda_ops(0, DType::kBF16);
  Ops* ops = owned.get();
  testing::ModelDriver driver(spec, dir, std::move(owned));
  const int64_t calls = driver.warm_up_gemms(64, 8);
  EXPECT_EQ(calls, 4 * static_cast<int64_t>(gemm_warmup_rows(64).size()) + static_cast<int64_t>(gemm_warmup_rows(8).size()));
  const std::multiset<std::string> warmed = timed(ops->describe_gemms());
  for (int64_t m : gemm_warmup_rows(64)) {
    size_t at_m = 0;
    for (const std::string& s : warmed) at_m += s.rfind("m=" + std::to_string(m) + " ", 0) == 0 ? 1 : 0;
    EXPECT_GE(at_m, 4u) << "the four layer shapes timed at m = " << m << ":\n" << ops->describe_gemms();
  }

  // Two prompts prefilled together (13 + 11 = 24 rows), then 6 greedy decode steps of both.
  StepPlan prefill;
  std::vector<int32_t> a, b;
  for (int i = 0; i < 13; ++i) a.push_back(3 + 7 * i % 200);
  for (int i = 0; i < 11; ++i) b.push_back(5 + 11 * i % 200);
  driver.add(prefill, 1, a, true);
  driver.add(prefill, 2, b, true);
  testing::StepOutput out = driver.step(std::move(prefill));
  ASSERT_EQ(out.tokens.size(), 2u);
  for (int step = 0; step < 6; ++step) {
    StepPlan decode;
    driver.add(decode, 1, {out.tokens[0]}, true);
    driver.add(decode, 2, {out.tokens[1]}, true);
    out = driver.step(std::move(decode));
    ASSERT_EQ(out.tokens.size(), 2u);
  }
  EXPECT_EQ(timed(ops->describe_gemms()), warmed) << "a step timed GEMM candidates after the warm-up:\n"
                                                  << ops->describe_gemms();
}

}  // namespace
}  // namespace conveyor
