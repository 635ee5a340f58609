// GemmRunner against the CPU twin (kernels/cpu/matmul.h): random x, w, bias rounded to bf16/f16, the
// reference in fp32 from the same rounded values, outputs in the input type or f32, accumulate into a
// random prior y, every element checked. For m <= kGemvMaxRows the runner times gemv against cuBLASLt:
// both choices, forced and timed, inside and outside graph capture. Also: cached plans give the same
// result, unsupported shapes and types throw.
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cuda/gemv.h"
#include "runtime/core/error.h"
#include "tests/kernels/dense_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::compare_all;
using testing::TestBuffer;
using testing::download;
using testing::random_floats;
using testing::round_all;
using testing::upload;
using testing::upload_into;

struct Shape {
  int64_t m, n, k;
};

// Random x, w, bias (and prior y) for a shape, with the expected result of `calls` accumulating runs
// (or of one plain run).
struct Case {
  std::vector<float> y0, want, bias;
  TestBuffer dx, dw, dbias, dy;
};

Case make_case(DType ab, DType out, bool with_bias, Shape s, bool accumulate, int calls = 1) {
  const uint64_t seed = static_cast<uint64_t>(s.m * 7919 + s.n * 31 + s.k);
  const auto x = round_all(random_floats(static_cast<size_t>(s.m * s.k), seed, -1.f, 1.f), ab);
  const auto w = round_all(random_floats(static_cast<size_t>(s.n * s.k), seed + 1, -1.f, 1.f), ab);
  const auto bias = round_all(random_floats(static_cast<size_t>(s.n), seed + 2, -1.f, 1.f), ab);
  auto y0 = round_all(random_floats(static_cast<size_t>(s.m * s.n), seed + 3, -1.f, 1.f), out);
  std::vector<float> want(static_cast<size_t>(s.m * s.n));
  matmul_ref(want.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, static_cast<int>(s.m),
             static_cast<int>(s.n), static_cast<int>(s.k));
  if (accumulate) {
    for (size_t i = 0; i < want.size(); ++i) want[i] = y0[i] + static_cast<float>(calls) * want[i];
  }
  TestBuffer dy(want.size() * dtype_size(out));
  upload_into(dy.get(), y0, out);
  std::vector<float> used_bias = with_bias ? bias : std::vector<float>(static_cast<size_t>(s.n), 0.f);
  return {std::move(y0), std::move(want), std::move(used_bias), upload(x, ab), upload(w, ab), upload(bias, ab),
          std::move(dy)};
}

void expect_matches(const Case& c, DType ab, DType out, bool with_bias, Shape s, bool accumulate, int calls = 1) {
  // Each accumulating call rounds to `out` once more.
  auto tol = testing::matmul_tolerance(out, s.k);
  tol.rtol *= static_cast<float>(calls);
  std::vector<float> got = download(c.dy.get(), c.want.size(), out);
  if (accumulate && out != DType::kF32) {
    // cuBLASLt's beta = 1 epilogue may round to `out` between adding y and the bias (as separate adds
    // would): the error is then relative to the operands' size, not to a sum that cancelled. Every
    // element is checked against that bound and then compared exactly to the bounded value.
    for (size_t i = 0; i < got.size(); ++i) {
      const float b = c.bias[i % c.bias.size()];
      const float operands = std::fabs(c.y0[i]) + std::fabs(c.want[i] - c.y0[i] - b) + std::fabs(b);
      const float bound = tol.atol + tol.rtol * std::max(std::fabs(c.want[i]), operands);
      if (std::fabs(got[i] - c.want[i]) <= bound) got[i] = c.want[i];
    }
  }
  EXPECT_EQ(compare_all(got, c.want, tol.atol, tol.rtol), "")
      << "ab " << dtype_name(ab) << " out " << dtype_name(out) << (with_bias ? " bias" : "")
      << (accumulate ? " accumulate" : "") << " m=" << s.m << " n=" << s.n << " k=" << s.k;
}

void check(GemmRunner& gemm, DType ab, DType out, bool with_bias, Shape s, bool accumulate = false) {
  const Case c = make_case(ab, out, with_bias, s, accumulate);
  gemm.run(c.dy.get(), out, c.dx.get(), c.dw.get(), ab, with_bias ? c.dbias.get() : nullptr, s.m, s.n, s.k, nullptr,
           accumulate);
  expect_matches(c, ab, out, with_bias, s, accumulate);
}

size_t count_of(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) ++count;
  return count;
}

TEST(GemmGpu, MatchesCpuTwin) {
  testing::TestGemm gemm;
  const std::vector<Shape> nk = {{0, 100, 72}, {0, 7, 64}, {0, 37, 8}, {0, 1000, 512}, {0, 576, 1536}};
  for (DType ab : {DType::kBF16, DType::kF16}) {
    for (DType out : {ab, DType::kF32}) {
      for (bool with_bias : {false, true}) {
        for (int64_t m : {1, 5, 16, 128, 300}) {
          for (Shape s : nk) check(gemm, ab, out, with_bias, {m, s.n, s.k});
        }
      }
    }
  }
}

TEST(GemmGpu, HeuristicOnlyAndCachedPlansAgree) {
  testing::TestGemm gemm(4u << 20);
  gemm.set_autotune(false);
  for (int64_t m : {1, 16, 300}) check(gemm, DType::kBF16, DType::kBF16, true, {m, 256, 1024});
  const size_t planned = gemm.cached_shapes();
  EXPECT_EQ(planned, 3u);
  gemm.set_autotune(true);  // plans made without timing are timed on their next use
  for (int64_t m : {1, 16, 300}) check(gemm, DType::kBF16, DType::kBF16, true, {m, 256, 1024});
  EXPECT_EQ(gemm.cached_shapes(), planned);
}

// Above the gemv range one m per power-of-two bucket is timed: m = 100 is, m = 120 and 128 (same
// bucket) take its algorithm untimed, m = 300 (the next) is timed; every result matches the twin.
TEST(GemmGpu, OneTimedShapePerBucket) {
  testing::TestGemm gemm;
  for (int64_t m : {100, 120, 128, 300}) check(gemm, DType::kBF16, DType::kBF16, true, {m, 1000, 512});
  const std::string d = gemm.describe();
  EXPECT_EQ(count_of(d, "as timed at m=100"), 2u) << d;
  EXPECT_EQ(count_of(d, "as timed at"), 2u) << d;
  EXPECT_EQ(gemm.cached_shapes(), 4u);
}

// beta = 1 on the cuBLASLt path (gemv kept out), for decode and prefill row counts; the first call
// of each shape is timed, which must not add to y more than once.
TEST(GemmGpu, AccumulateThroughCublasLt) {
  testing::TestGemm gemm;
  gemm.set_gemv_policy(GemvPolicy::kNever);
  for (DType ab : {DType::kBF16, DType::kF16}) {
    for (bool with_bias : {false, true}) {
      for (int64_t m : {1, 16, 128, 300}) check(gemm, ab, ab, with_bias, {m, 1000, 512}, true);
    }
  }
  EXPECT_EQ(count_of(gemm.describe(), "gemv"), 0u) << gemm.describe();
  EXPECT_EQ(count_of(gemm.describe(), " acc:"), gemm.cached_shapes()) << gemm.describe();
}

// m in gemv range: the timed choice, forced gemv and forced cuBLASLt all match, with and without
// accumulate, bias and f32 logits; describe() names one implementation per shape.
TEST(GemmGpu, GemvRangeEveryChoiceMatches) {
  for (GemvPolicy policy : {GemvPolicy::kAuto, GemvPolicy::kAlways, GemvPolicy::kNever}) {
    testing::TestGemm gemm;
    gemm.set_gemv_policy(policy);
    for (DType ab : {DType::kBF16, DType::kF16}) {
      for (int64_t m : {1, 3, 16}) {
        check(gemm, ab, ab, true, {m, 1000, 4096});
        check(gemm, ab, ab, m != 3, {m, 4097, 1032}, true);
        check(gemm, ab, DType::kF32, true, {m, 2048, 4096});
      }
      check(gemm, ab, ab, true, {17, 1000, 4096});  // just past gemv range: always cuBLASLt
    }
    const std::string text = gemm.describe();
    EXPECT_EQ(count_of(text, "gemv") + count_of(text, "cublaslt"), gemm.cached_shapes()) << text;
    EXPECT_GE(count_of(text, "cublaslt"), 2u) << text;  // the m = 17 shapes
    if (policy == GemvPolicy::kAlways) {
      EXPECT_EQ(count_of(text, "gemv"), gemm.cached_shapes() - 2) << text;
    }
    if (policy == GemvPolicy::kNever) {
      EXPECT_EQ(count_of(text, "gemv"), 0u) << text;
    }
  }
}

// Captured into a graph: an untimed shape takes the cuBLASLt heuristic, a shape timed before capture
// keeps its choice (gemv when forced); replaying an accumulating graph adds once per replay.
TEST(GemmGpu, GraphCaptureUsesEarlierChoice) {
  for (GemvPolicy policy : {GemvPolicy::kAuto, GemvPolicy::kAlways}) {
    testing::TestGemm gemm;
    gemm.set_gemv_policy(policy);
    const DType ab = DType::kBF16;
    const Shape tuned{4, 1000, 4096}, untimed{2, 1000, 4096};
    check(gemm, ab, ab, true, tuned, true);  // times the shape outside capture
    const Case a = make_case(ab, ab, true, tuned, true, 2);
    const Case b = make_case(ab, ab, false, untimed, true, 2);
    cudaStream_t stream;
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CONVEYOR_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    gemm.run(a.dy.get(), ab, a.dx.get(), a.dw.get(), ab, a.dbias.get(), tuned.m, tuned.n, tuned.k, stream, true);
    gemm.run(b.dy.get(), ab, b.dx.get(), b.dw.get(), ab, nullptr, untimed.m, untimed.n, untimed.k, stream, true);
    CONVEYOR_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CONVEYOR_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) CONVEYOR_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream));
    CONVEYOR_CUDA_CHECK(cudaGraphExecDestroy(exec));
    CONVEYOR_CUDA_CHECK(cudaGraphDestroy(graph));
    CONVEYOR_CUDA_CHECK(cudaStreamDestroy(stream));
    expect_matches(a, ab, ab, true, tuned, true, 2);
    expect_matches(b, ab, ab, false, untimed, true, 2);
    const std::string text = gemm.describe();
    if (policy == GemvPolicy::kAlways) {
      EXPECT_EQ(count_of(text, "gemv"), 2u) << text;
    }
    if (policy == GemvPolicy::kAuto) {  // the untimed shape
      EXPECT_EQ(count_of(text, "heuristic"), 1u) << text;
    }
  }
}

TEST(GemmGpu, NoWorkspaceStillRuns) {
  testing::TestGemm gemm(0);
  check(gemm, DType::kF16, DType::kF16, false, {16, 512, 2048});
}

TEST(GemmGpu, ZeroRowsIsANoOp) {
  testing::TestGemm gemm;
  TestBuffer buf(1 << 12);
  EXPECT_NO_THROW(gemm.run(buf.get(), DType::kBF16, buf.get(), buf.get(), DType::kBF16, nullptr, 0, 8, 8, nullptr));
  EXPECT_EQ(gemm.cached_shapes(), 0u);
}

TEST(GemmGpu, RejectsUnsupportedShapesAndTypes) {
  testing::TestGemm gemm;
  TestBuffer buf(1 << 16);
  void* p = buf.get();
  // k not a multiple of 8: rows of x and w would not be 16-byte aligned.
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 7, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 100, nullptr), Error);
  // Inputs must be bf16 or f16; the output the input type or f32.
  EXPECT_THROW(gemm.run(p, DType::kF32, p, p, DType::kF32, nullptr, 4, 8, 8, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kF16, p, p, DType::kBF16, nullptr, 4, 8, 8, nullptr), Error);
  // Accumulating needs y in the input dtype.
  EXPECT_THROW(gemm.run(p, DType::kF32, p, p, DType::kBF16, nullptr, 4, 8, 8, nullptr, true), Error);
  // Misaligned x.
  EXPECT_THROW(gemm.run(p, DType::kBF16, buf.as<char>() + 2, p, DType::kBF16, nullptr, 4, 8, 8, nullptr), Error);
  EXPECT_THROW(gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 0, 8, nullptr), Error);
  try {
    gemm.run(p, DType::kBF16, p, p, DType::kBF16, nullptr, 4, 8, 7, nullptr);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("multiple of 8"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
