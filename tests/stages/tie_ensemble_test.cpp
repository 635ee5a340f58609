// The tie rule's second opinion (tie_ensemble.h) on the CPU, over the FP8 KV cache of the tiny
// ct_channel checkpoint (scales 1.0, the noisiest case): the H200's one divergence past the tie
// fraction (f16 and bf16, prompt 0, step 7: 137 where the fp32 twin picks 301 by a gap of 0.223 > 0.177)
// is a tie because the CPU twin itself, at 16-bit storage with rounding jitter, picks 137 there; CPU
// stand-ins for a GPU (the storage twin under seeds the ensemble does not use) pass the whole
// comparison; a planted defect (keys not rotated) still fails it. The same holds teacher-forced (greedy_forced,
// check_forced): the stand-ins pick the twin's token at 88-92% of all steps and every other step is a tie, while the
// defect has a non-tie difference in every prompt.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/model/quantization.h"
#include "runtime/model/spec.h"
#include "stages/cpu_ops.h"
#include "tests/stages/gpu_tie_rule.h"
#include "tests/stages/tie_ensemble.h"
#include "tests/stages/twin_comparison.h"
#include "tests/support/test_support.h"

namespace conveyor::testing {
namespace {

struct Fp8KvCase {
  std::string dir;
  ModelSpec spec = load_model_spec(dir);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<GreedyRun> want;  // the fp32 twin with the FP8 cache

  explicit Fp8KvCase(const std::string& layout) : dir(data_path("fp8/" + layout)) {
    prompts = fp8_prompts();
    ModelDriver cpu(spec, dir, make_cpu_ops(), /*kv_fp8=*/true);
    want = greedy_alone(cpu, prompts, 24);
  }

  // `ops` generating free-running (prompts that fail the tie rule with the ensemble's second opinion) or
  // teacher-forced (each prompt's count stops at its first defect where `to_first_defect`: a defect's every
  // difference asks the ensemble), against the twin; the comparison stops once `stop_after_failed` prompts failed.
  TwinComparison compare(std::unique_ptr<Ops> ops, DType storage, bool forced, bool to_first_defect = false,
                         size_t stop_after_failed = SIZE_MAX) const {
    ModelDriver gpu(spec, dir, std::move(ops), true);
    const std::vector<GreedyRun> runs =
        forced ? greedy_forced(gpu, prompts, tokens_of(want)) : greedy_alone(gpu, prompts, 24);
    return compare_with_twin(dtype_name(storage), prompts, want, forced ? nullptr : &runs, forced ? &runs : nullptr,
                             TieEnsemble(spec, dir, true, storage), to_first_defect ? 1 : SIZE_MAX, stop_after_failed);
  }
  int failures(std::unique_ptr<Ops> ops, DType storage, size_t stop_after_failed = SIZE_MAX) const {
    return static_cast<int>(compare(std::move(ops), storage, false, false, stop_after_failed).free_failures);
  }
};

const Fp8KvCase& fp8_kv_case() {
  static const Fp8KvCase c("ct_channel");
  return c;
}

TEST(TieEnsemble, TheH200DivergenceOfTheFp8KvTestIsATie) {
  const Fp8KvCase& c = fp8_kv_case();
  ASSERT_EQ(c.want[0].tokens.at(7), 301);
  const std::vector<float>& ref = c.want[0].logits.at(7);
  EXPECT_GT(top2_gap(ref), tie_threshold(ref, kTieFractionBf16));  // past the tie fraction
  const std::vector<int32_t> prefix(c.want[0].tokens.begin(), c.want[0].tokens.begin() + 7);
  for (DType storage : {DType::kF16, DType::kBF16}) {
    const TieEnsemble::Verdict v = TieEnsemble(c.spec, c.dir, true, storage).judge(c.prompts[0], prefix, 301, 137, ref);
    EXPECT_NEAR(v.margin, 0.2231f, 1e-3f);
    EXPECT_TRUE(v.tie) << dtype_name(storage) << ": closest member margin " << v.closest;
  }
}

// Round 17's H100, every decode linear through the FP8 gemv (fp8_gemv_cuda, whose sums are the twin's to fp32):
// ct_channel bf16, FP8 KV, prompt 4, step 2 picks 261 where the fp32 twin picks 311 by 0.254. The 64 members the
// stage test then asked came within 0.042 of it; 256 reach it (1,024: closest -0.075), so it is a tie at ~2.4 RMS
// moves. The ensemble now has 256 members by default (tie_ensemble.h); this pins the claim.
TEST(TieEnsemble, TheH100GemvDivergenceOfTheFp8KvTestIsATie) {
  const Fp8KvCase& c = fp8_kv_case();
  ASSERT_EQ(c.want[4].tokens.at(2), 311);
  const std::vector<float>& ref = c.want[4].logits.at(2);
  EXPECT_GT(top2_gap(ref), tie_threshold(ref, kTieFractionBf16));
  const std::vector<int32_t> prefix(c.want[4].tokens.begin(), c.want[4].tokens.begin() + 2);
  const TieEnsemble::Verdict v = TieEnsemble(c.spec, c.dir, true, DType::kBF16).judge(c.prompts[4], prefix, 311,
                                                                                            261, ref);
  EXPECT_NEAR(v.margin, 0.2536f, 1e-3f);
  EXPECT_TRUE(v.tie) << "closest member margin " << v.closest;
}

// Round 19's H100, every decode linear through cuBLASLt (the default then): ct_kv (the checkpoint's k/v scales) bf16,
// FP8 KV, prompt 1, teacher-forced step 20 picks 170 where the fp32 twin picks 94 by 0.308, 3.1 RMS moves of the
// twin's bf16 noise. The closest of the first 256 members came within 0.013 of flipping it; asked on (up to 2,048),
// a member flips it. A tie, as the escalation in tie_ensemble.h rules.
TEST(TieEnsemble, TheH100CublasLtDivergenceOfTheFp8KvTestIsATie) {
  const Fp8KvCase c("ct_kv");
  ASSERT_EQ(c.want[1].tokens.at(20), 94);
  const std::vector<float>& ref = c.want[1].logits.at(20);
  EXPECT_GT(top2_gap(ref), tie_threshold(ref, kTieFractionBf16));
  const std::vector<int32_t> prefix(c.want[1].tokens.begin(), c.want[1].tokens.begin() + 20);
  const TieEnsemble e(c.spec, c.dir, true, DType::kBF16);
  const TieEnsemble::Verdict v = e.judge(c.prompts[1], prefix, 94, 170, ref);
  EXPECT_NEAR(v.margin, 0.3078f, 1e-3f);
  EXPECT_GT(v.asked, 256) << "the first look alone does not reach it";
  EXPECT_TRUE(v.tie) << "closest member margin " << v.closest << " of " << v.asked;
  // Without the escalation, 256 members leave it a defect: the step is why the escalation exists.
  EXPECT_FALSE(TieEnsemble(c.spec, c.dir, true, DType::kBF16, 256, 256).judge(c.prompts[1], prefix, 94, 170, ref).tie);
}

TEST(TieEnsemble, StorageTwinsPassTheComparison) {
  const Fp8KvCase& c = fp8_kv_case();
  for (DType storage : {DType::kF16, DType::kBF16})
    for (uint32_t seed : {0u, 5001u, 5003u})
      EXPECT_EQ(c.failures(std::make_unique<StorageTwinOps>(storage, c.spec.vocab, seed), storage), 0)
          << dtype_name(storage) << " seed " << seed;
}

TEST(TieEnsemble, StorageTwinsPassTheForcedComparison) {
  const Fp8KvCase& c = fp8_kv_case();
  for (DType storage : {DType::kF16, DType::kBF16})
    for (uint32_t seed : {0u, 5001u, 5003u}) {
      const TwinComparison f = c.compare(std::make_unique<StorageTwinOps>(storage, c.spec.vocab, seed), storage, true);
      EXPECT_EQ(f.defects, 0u) << dtype_name(storage) << " seed " << seed;
      EXPECT_TRUE(f.forced_floor_holds()) << dtype_name(storage) << " seed " << seed;
    }
}

// The planted defect fails all 12 prompts teacher-forced and 4 free-running (the others diverge at a tie first), and
// each failing prompt's verdict asks 256 twins or more: the two defect tests stop at the third failing prompt (with
// all 12 they took 117 of this test's 136 s alone, and 533 s of CI's tests beside the others).
constexpr size_t kDefectPrompts = 3;

TEST(TieEnsemble, APlantedDefectFailsTheForcedComparison) {
  const Fp8KvCase& c = fp8_kv_case();
  for (DType storage : {DType::kF16, DType::kBF16}) {
    auto defect = std::make_unique<StorageTwinOps>(storage, c.spec.vocab, 0, PlantedDefect::kKeysNotRotated);
    const TwinComparison f = c.compare(std::move(defect), storage, true, true, kDefectPrompts);
    EXPECT_EQ(f.defects, kDefectPrompts) << dtype_name(storage) << ": prompts with a defect";
  }
}

TEST(TieEnsemble, APlantedDefectStillFails) {
  const Fp8KvCase& c = fp8_kv_case();
  for (DType storage : {DType::kF16, DType::kBF16})
    EXPECT_EQ(c.failures(std::make_unique<StorageTwinOps>(storage, c.spec.vocab, 0, PlantedDefect::kKeysNotRotated),
                         storage, kDefectPrompts),
              static_cast<int>(kDefectPrompts))
        << dtype_name(storage);
}

// The FP8 stage test's every layout (cuda_fp8_gpu_test.cpp) with a CPU stand-in for the GPU (the storage twin under a
// seed the ensemble does not use) in place of the CUDA backend: free-running, every first difference is a tie, and
// teacher-forced, no difference is a non-tie and >= 75% of the steps pick the twin's token (87-99% here).
TEST(TieEnsemble, AStandInPassesEveryLayoutOfTheFp8StageTest) {
  const auto ps = fp8_prompts();
  struct Layout {
    const char* name;
    bool quantize_at_load, kv_fp8;
  };
  for (const Layout l : {Layout{"ct_channel", false, false}, Layout{"ct_tensor", false, false},
                         Layout{"twin_fp32", true, false}, Layout{"ct_kv", false, true},
                         Layout{"ct_channel", false, true}, Layout{"twin_fp32", false, true}}) {
    const std::string dir = data_path(std::string("fp8/") + l.name);
    ModelSpec spec = load_model_spec(dir);
    apply_quantization_flag(spec.quant, l.quantize_at_load ? "fp8" : "none");
    ModelDriver cpu(spec, dir, make_cpu_ops(), l.kv_fp8);
    const std::vector<GreedyRun> want = greedy_alone(cpu, ps, 24);
    for (DType dt : {DType::kF16, DType::kBF16}) {
      ModelDriver gpu(spec, dir, std::make_unique<StorageTwinOps>(dt, spec.vocab, 5001), l.kv_fp8);
      const std::string what = std::string(l.name) + (l.kv_fp8 ? " FP8 KV " : " ") + dtype_name(dt);
      const TwinComparison r = compare_backend_with_twin(what, gpu, ps, want, TieEnsemble(spec, dir, l.kv_fp8, dt));
      EXPECT_EQ(r.first_error, "") << what;
      EXPECT_TRUE(r.forced_floor_holds()) << what << ": " << r.equal << " of " << r.total;
    }
  }
}

}  // namespace
}  // namespace conveyor::testing
