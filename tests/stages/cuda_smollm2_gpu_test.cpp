// The real SmolLM2-135M-Instruct Q4_1 GGUF on the CUDA backend (bf16 and f16) against the CPU twin
// (fp32 CpuOps on the same dequantized weights): for each prompt of tests/data/smollm2_reference.json,
// 32 greedy tokens alone, then all prompts decoded as one batch. Tokens must follow the CPU's under the
// tie rule of gpu_tie_rule.h, judged on the CPU's own logits at each step (printed when accepted).
// The model comes from scripts/fetch_test_model.sh (or CONVEYOR_TEST_MODEL); missing, the test fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/spec.h"
#include "stages/cpu_ops.h"
#include "stages/cuda/cuda_ops.h"
#include "tests/stages/gpu_tie_rule.h"
#include "tests/stages/model_driver.h"
#include "tests/stages/reference_data.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::GreedyRun;
using testing::ModelDriver;

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (const testing::SmolLm2Reference& r : testing::load_smollm2_reference()) out.push_back(r.prompt);
  return out;
}

class CudaSmolLm2 : public ::testing::TestWithParam<DType> {
 protected:
  static constexpr int kNewTokens = 32;
  static void SetUpTestSuite() {
    const std::string path = testing::test_model_path();
    if (!std::filesystem::exists(path)) return;
    spec_ = new ModelSpec(load_model_spec(path));
    ModelDriver cpu(*spec_, path, make_cpu_ops());
    reference_ = new std::vector<GreedyRun>(testing::greedy_alone(cpu, prompts(), kNewTokens));
  }
  static void TearDownTestSuite() {
    delete reference_;
    delete spec_;
  }
  static ModelSpec* spec_;
  static std::vector<GreedyRun>* reference_;
};
ModelSpec* CudaSmolLm2::spec_ = nullptr;
std::vector<GreedyRun>* CudaSmolLm2::reference_ = nullptr;

void expect_follows(const std::vector<GreedyRun>& got, const std::vector<GreedyRun>& ref, DType dt, const std::string& label) {
  const float fraction = dt == DType::kBF16 ? testing::kTieFractionBf16 : testing::kTieFraction;
  const double min_share = dt == DType::kBF16 ? testing::kMinComparedBf16 : testing::kMinComparedF16;
  ASSERT_EQ(got.size(), ref.size()) << label;
  size_t matched = 0, total = 0;
  for (size_t p = 0; p < ref.size(); ++p) {
    const testing::TieCheck c =
        testing::check_with_ties(label + " prompt " + std::to_string(p), got[p].tokens, ref[p].tokens,
                                 [&](size_t i) { return ref[p].logits[i]; }, fraction);
    EXPECT_EQ(c.error, "");
    matched += c.matched;
    total += ref[p].tokens.size();
  }
  std::printf("[ compare  ] %s %s: %zu of %zu tokens equal the CPU twin's before any accepted tie\n", label.c_str(),
              dtype_name(dt), matched, total);
  EXPECT_GE(static_cast<double>(matched), min_share * static_cast<double>(total))
      << "only " << matched << " of " << total << " tokens followed the CPU twin";
}

TEST_P(CudaSmolLm2, GreedyFollowsTheCpuTwinAloneAndBatched) {
  CONVEYOR_REQUIRE_TEST_MODEL(testing::test_model_path());
  ASSERT_NE(reference_, nullptr);
  const DType dt = GetParam();
  const std::vector<std::vector<int32_t>> ps = prompts();
  {
    ModelDriver gpu(*spec_, testing::test_model_path(), make_cuda_ops(0, dt));
    expect_follows(testing::greedy_alone(gpu, ps, kNewTokens), *reference_, dt, "alone");
  }
  ModelDriver gpu(*spec_, testing::test_model_path(), make_cuda_ops(0, dt));
  expect_follows(testing::greedy_batched(gpu, ps, kNewTokens), *reference_, dt, "batched");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaSmolLm2, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace conveyor
