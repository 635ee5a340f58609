// Fp8GemmRunner (see fp8.h): cuBLASLt e4m3 GEMM, row-major acc[m, n] = a[m, k] b[n, k]^T computed as the
// column-major acc^T = b^T a (the TN layout Hopper FP8 requires). run() writes fp32 for the epilogue kernel;
// run_scaled() has cuBLASLt apply the outer-vector scales (its A is the weights, so its row vector is b_scale;
// its B the activations, column vector a_scale), bias and residual, declining where it has no algorithm.
// Which of the two a shape runs is timed per bucket of m (fused_choice), as neither wins everywhere.
#include <cublasLt.h>

#include <map>
#include <sstream>
#include <tuple>

#include "kernels/cuda/fp8.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/launch_timer.h"
#include "kernels/gemm_tuning.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

template <typename V>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

cudaDataType_t out_type(DType out) { return out == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }

// A fused linear's plan: the shape, y's dtype, beta, whether the bias rides the epilogue, and the
// alignments of y and the bias (views into a larger buffer may not meet cuBLASLt's default of 256).
struct ScaledKey {
  int64_t m, n, k;
  DType out;
  bool accumulate, bias;
  uint32_t align_y, align_bias;
  bool operator<(const ScaledKey& o) const {
    return std::tie(m, n, k, out, accumulate, bias, align_y, align_bias) <
           std::tie(o.m, o.n, o.k, o.out, o.accumulate, o.bias, o.align_y, o.align_bias);
  }
};

// One GEMM's descriptors and algorithm: the heuristic's usable candidates (up to kGemmTimedCandidates, best
// first), the one it runs, and whether that was timed (or taken from the shape's bucket, timed at another m).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulHeuristicResult_t candidates[kGemmTimedCandidates] = {};
  int n_candidates = 0;
  cublasLtMatmulAlgo_t algo = {};
  int algo_index = 0;
  bool tuned = false;
  float best_us = -1.f;  // the chosen algorithm's time, where this plan was timed
  int64_t timed_m = 0;   // the m it was timed at (its bucket's first)
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CONVEYOR_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// p's usable heuristic results under `pref` (p.algo the first). timed: up to kGemmTimedCandidates, in the
// heuristic's order, split-K partial sums reduced in fp32 (the compute type) where such algorithms exist, as
// GemmRunner reduces them (a bf16 y must not round every partial); else the heuristic's first under its default
// schemes, the one algorithm this runner ran before it timed any. Returns the heuristic's last status.
cublasStatus_t find_candidates(cublasLtHandle_t handle, Plan& p, cublasLtMatmulPreference_t pref, bool timed) {
  cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
  const auto fp32 = static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
  const auto any = static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK);
  for (uint32_t mask : {timed ? fp32 : any, any}) {
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof(mask));
    int found = 0;
    rc = cublasLtMatmulAlgoGetHeuristic(handle, p.op, p.a, p.b, p.d, p.d, pref, timed ? kGemmTimedCandidates : 1,
                                        p.candidates, &found);
    p.n_candidates = 0;
    for (int i = 0; rc == CUBLAS_STATUS_SUCCESS && i < found; ++i)
      if (p.candidates[i].state == CUBLAS_STATUS_SUCCESS) p.candidates[p.n_candidates++] = p.candidates[i];
    if (p.n_candidates > 0) break;
  }
  if (p.n_candidates > 0) p.algo = p.candidates[0].algo;
  return rc;
}

// The algorithm a bucket of shapes was timed with (its first eager m), for the bucket's other m.
struct TimedAlgo {
  cublasLtMatmulAlgo_t algo;
  int index;
  int64_t m;
};

}  // namespace

// A small-m shape's race: the gemv and cuBLASLt (+ epilogue) times, microseconds per linear.
struct SmallMChoice {
  float gemv_us = 0.f;
  float lt_us = 0.f;
};

// A bucket's race between run_scaled and run() + epilogue, microseconds per linear (infinity: declined).
struct FusedChoice {
  float fused_us = 0.f;
  float unfused_us = 0.f;
  bool fused() const { return fused_us <= unfused_us; }
};

struct Fp8GemmRunner::Impl {
  using Shape = std::tuple<int64_t, int64_t, int64_t>;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<Shape, std::unique_ptr<Plan>> plans;
  std::map<Shape, SmallMChoice> small_m;
  std::map<Shape, FusedChoice> fused;  // keyed by gemm_tuning_bucket(m)
  std::map<ScaledKey, std::unique_ptr<Plan>> scaled_plans;  // nullptr: cuBLASLt cannot fuse the shape
  // The runner's own default; CudaOps sets runtime.fp8_gemv's (auto since round 19, when the FP8 stage test passed
  // under it on an H100; batch 1 FP8 0.4-2.3% faster under auto than off there).
  GemvPolicy gemv_policy = GemvPolicy::kNever;
  LaunchTimer timer;
  // Timing each GEMM's cuBLASLt candidates on its bucket's first eager use (CONVEYOR_FP8_GEMM_TUNE=1; until
  // a GPU run measures it, the heuristic's first as before): on an H100 the heuristic's first for m = 256
  // ran o and down (n = 4096) as 64 tiles of 128 x 128 on 132 SMs (benchmarks/results/nvidia-h100/2026-12-07-r19).
  bool tune_on = env_switch_opt_in("CONVEYOR_FP8_GEMM_TUNE");
  LaunchTimer tune_timer;  // apart from `timer`, which may be timing the whole linear around a GEMM's tuning
  std::map<ScaledKey, TimedAlgo> timed;  // by bucket_key

  // The key a plan's timing is shared under: its bucket of m (gemm_tuning_bucket), y's dtype (kF32 for run()'s
  // plans), the epilogue and alignments; not accumulate (beta is not part of a plan's descriptors).
  static ScaledKey bucket_key(ScaledKey key) {
    key.m = gemm_tuning_bucket(key.m);
    key.accumulate = false;
    return key;
  }
  // Settles p's algorithm before a call: the one its bucket was timed with where cuBLASLt takes it for p's shape;
  // else, where `may_time` (the call may write its output run after run) and the stream is not being captured,
  // times every candidate with launch(algo) and keeps the fastest; else the heuristic's first, for now.
  template <typename Launch>
  void settle(Plan& p, const ScaledKey& key, bool may_time, cudaStream_t stream, Launch&& launch) {
    if (p.tuned || !tune_on) return;
    const ScaledKey bucket = bucket_key(key);
    if (auto it = timed.find(bucket); it != timed.end()) {
      cublasLtMatmulHeuristicResult_t check = {};
      if (cublasLtMatmulAlgoCheck(handle, p.op, p.a, p.b, p.d, p.d, &it->second.algo, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= workspace_bytes) {
        p.algo = it->second.algo, p.algo_index = it->second.index, p.timed_m = it->second.m, p.tuned = true;
        return;
      }
    }
    if (!may_time || capturing(stream)) return;
    // Decode shapes meet their weights in DRAM (launch_timer.h, ColdL2), as the small-m race times them.
    const ColdL2* cold = key.m <= kGemvMaxRows ? &cold_l2() : nullptr;
    const auto [index, best] = tune_timer.fastest(
        p.n_candidates, [&](int i) { return launch(p.candidates[i].algo) == CUBLAS_STATUS_SUCCESS; },
        kGemmTimedRuns, stream, cold);
    if (index >= 0) p.algo = p.candidates[index].algo, p.algo_index = index;
    p.best_us = index >= 0 ? best : -1.f;
    p.timed_m = key.m;
    p.tuned = true;
    timed[bucket] = TimedAlgo{p.algo, p.algo_index, key.m};
  }

  Plan& plan(int64_t m, int64_t n, int64_t k) {
    auto& slot = plans[{m, n, k}];
    if (slot) return *slot;
    auto p = std::make_unique<Plan>();
    CONVEYOR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_attr(p->op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
    set_attr(p->op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
    const auto um = static_cast<uint64_t>(m), un = static_cast<uint64_t>(n), uk = static_cast<uint64_t>(k);
    CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, uk, un, k));  // b^T: the weights
    CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, uk, um, k));  // a: the activations
    CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32F, un, um, n));
    cublasLtMatmulPreference_t pref = nullptr;
    CONVEYOR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    const cublasStatus_t rc = find_candidates(handle, *p, pref, tune_on);
    cublasLtMatmulPreferenceDestroy(pref);
    CONVEYOR_CHECK(p->n_candidates > 0, "Fp8GemmRunner: cuBLASLt has no e4m3 algorithm for [",
                   m, ", ", k, "] x [", n, ", ", k, "]^T -> f32 (status ", cublasLtGetStatusName(rc),
                   "); FP8 needs k % 16 == 0, n % 4 == 0, 16-byte aligned buffers and an sm_89+ GPU");
    slot = std::move(p);
    return *slot;
  }

  std::unique_ptr<Plan> make_scaled_plan(const ScaledKey& key, const float* a_scale, const float* b_scale,
                                         const void* bias) const;
};

// The fused plan, or nullptr when cuBLASLt has no algorithm for it: an older cuBLASLt rejects the
// scale mode itself, a GPU without outer-vector FP8 kernels finds none. Neither is an error.
std::unique_ptr<Plan> Fp8GemmRunner::Impl::make_scaled_plan(const ScaledKey& key, const float* a_scale,
                                                            const float* b_scale, const void* bias) const {
  auto p = std::make_unique<Plan>();
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attr(p->op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
  set_attr(p->op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
  const auto outer = static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F);
  for (auto attr : {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE})
    if (cublasLtMatmulDescSetAttribute(p->op, attr, &outer, sizeof(outer)) != CUBLAS_STATUS_SUCCESS) return nullptr;
  // The first call's pointers, so the heuristic sees real alignments; every call sets its own.
  set_attr(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(b_scale));
  set_attr(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(a_scale));
  if (key.bias) {
    set_attr(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<int32_t>(CUBLASLT_EPILOGUE_BIAS));
    set_attr(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(out_type(key.out)));
    set_attr(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  }
  const auto um = static_cast<uint64_t>(key.m), un = static_cast<uint64_t>(key.n), uk = static_cast<uint64_t>(key.k);
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, uk, un, key.k));  // b^T: the weights
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, uk, um, key.k));  // a: the activations
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, out_type(key.out), un, um, key.n));  // y, also C
  cublasLtMatmulPreference_t pref = nullptr;
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  const uint32_t align_ab = 16;  // run_scaled checks the codes are 16-byte aligned
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align_ab, sizeof(align_ab));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &key.align_y, sizeof(key.align_y));
  find_candidates(handle, *p, pref, tune_on);
  cublasLtMatmulPreferenceDestroy(pref);
  if (p->n_candidates == 0) return nullptr;
  return p;
}

Fp8GemmRunner::Fp8GemmRunner(void* workspace, size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  CONVEYOR_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace = workspace;
  impl_->workspace_bytes = workspace_bytes;
}

Fp8GemmRunner::~Fp8GemmRunner() {
  impl_->plans.clear();
  impl_->scaled_plans.clear();
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

std::optional<bool> Fp8GemmRunner::small_m_choice(int64_t m, int64_t n, int64_t k, cudaStream_t stream) const {
  if (m > kGemvMaxRows || impl_->gemv_policy == GemvPolicy::kNever) return false;
  if (impl_->gemv_policy == GemvPolicy::kAlways) return true;
  if (auto it = impl_->small_m.find({m, n, k}); it != impl_->small_m.end())
    return it->second.gemv_us <= it->second.lt_us;
  if (capturing(stream)) return true;
  return std::nullopt;
}

std::optional<bool> Fp8GemmRunner::fused_choice(int64_t m, int64_t n, int64_t k, cudaStream_t stream) const {
  if (auto it = impl_->fused.find({gemm_tuning_bucket(m), n, k}); it != impl_->fused.end()) return it->second.fused();
  if (capturing(stream)) return false;  // the path this runner had before fusing
  return std::nullopt;
}

bool Fp8GemmRunner::time_fused(int64_t m, int64_t n, int64_t k, const std::function<bool()>& fused,
                               const std::function<void()>& unfused, cudaStream_t stream) {
  FusedChoice choice;
  choice.fused_us = impl_->timer.us(fused, kGemmTimedRuns, stream);
  choice.unfused_us = impl_->timer.us(
      [&] {
        unfused();
        return true;
      },
      kGemmTimedRuns, stream);
  impl_->fused[{gemm_tuning_bucket(m), n, k}] = choice;
  return choice.fused();
}

bool Fp8GemmRunner::time_small_m(int64_t m, int64_t n, int64_t k, const std::function<void()>& gemv,
                                 const std::function<void()>& lt, cudaStream_t stream) {
  const ColdL2& cold = cold_l2();  // decode shapes meet their weights in DRAM (launch_timer.h)
  auto timed = [&](const std::function<void()>& launch) {
    return impl_->timer.us_cold(
        [&] {
          launch();
          return true;
        },
        kGemmTimedRuns, stream, cold);
  };
  SmallMChoice choice;
  choice.gemv_us = timed(gemv);
  choice.lt_us = timed(lt);
  impl_->small_m[{m, n, k}] = choice;
  return choice.gemv_us <= choice.lt_us;
}

void Fp8GemmRunner::set_gemv_policy(GemvPolicy policy) { impl_->gemv_policy = policy; }

std::string Fp8GemmRunner::describe() const {
  std::ostringstream out;
  for (const auto& [shape, c] : impl_->small_m) {
    const auto& [m, n, k] = shape;
    out << "m=" << m << " n=" << n << " k=" << k << " e4m3: " << (c.gemv_us <= c.lt_us ? "gemv" : "cublaslt")
        << " (gemv " << c.gemv_us << " us, cublaslt " << c.lt_us << " us)\n";
  }
  for (const auto& [shape, c] : impl_->fused) {
    const auto& [m, n, k] = shape;
    out << "m<=" << m << " n=" << n << " k=" << k << " e4m3: " << (c.fused() ? "fused" : "fp32+epilogue")
        << " (fused " << c.fused_us << " us, fp32+epilogue " << c.unfused_us << " us)\n";
  }
  // Each cuBLASLt GEMM's algorithm: "m=256 n=4096 k=4096 e4m3->f32: algo 2/8 (14.1 us)", "... as timed at m=200".
  auto algo_line = [&](int64_t m, int64_t n, int64_t k, const std::string& kind, const Plan& p) {
    out << "m=" << m << " n=" << n << " k=" << k << " e4m3->" << kind << ": " << (p.tuned ? "algo " : "heuristic ")
        << p.algo_index << "/" << p.n_candidates;
    if (p.tuned && p.timed_m != m) out << " (as timed at m=" << p.timed_m << ")";
    else if (p.tuned && p.best_us >= 0.f) out << " (" << p.best_us << " us)";
    out << "\n";
  };
  for (const auto& [shape, p] : impl_->plans) {
    const auto& [m, n, k] = shape;
    algo_line(m, n, k, "f32", *p);
  }
  for (const auto& [key, p] : impl_->scaled_plans) {
    const std::string kind = std::string(dtype_name(key.out)) + " scaled" + (key.accumulate ? " acc" : "");
    if (p) algo_line(key.m, key.n, key.k, kind, *p);
  }
  return out.str();
}

void Fp8GemmRunner::run(float* acc, const uint8_t* a, const uint8_t* b, int64_t m, int64_t n, int64_t k,
                        cudaStream_t stream) {
  CONVEYOR_CHECK(k % 16 == 0 && n % 4 == 0, "Fp8GemmRunner: [", m, ", ", k, "] x [", n, ", ", k,
                 "]^T: FP8 GEMMs need k % 16 == 0 and n % 4 == 0");
  if (m == 0) return;
  Plan& p = impl_->plan(m, n, k);
  const float alpha = 1.f, beta = 0.f;
  auto matmul = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(impl_->handle, p.op, &alpha, b, p.a, a, p.b, &beta, acc, p.d, acc, p.d, &algo,
                          impl_->workspace, impl_->workspace_bytes, stream);
  };
  // Every run writes the same acc (beta = 0), so this call may time the candidates.
  impl_->settle(p, ScaledKey{m, n, k, DType::kF32, false, false, 16u, 16u}, true, stream, matmul);
  CONVEYOR_CUBLAS_CHECK(matmul(p.algo));
}

bool Fp8GemmRunner::run_scaled(void* y, DType out, const uint8_t* a, const float* a_scale, const uint8_t* b,
                               const float* b_scale, const void* bias, DType bias_dt, int64_t m, int64_t n, int64_t k,
                               bool accumulate, cudaStream_t stream) {
  // What the fused path cannot take goes to run() plus the epilogue (which also reports bad shapes).
  if ((out != DType::kBF16 && out != DType::kF16) || (bias != nullptr && bias_dt != out)) return false;
  // y's rows in 16-byte multiples too: on an H100 with cuBLASLt 13.1 the heuristic found nothing for n = 1028.
  if (k % 16 != 0 || n % 8 != 0) return false;
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(a_scale),
                        static_cast<const void*>(b_scale)})
    if (gemm_alignment_of(p) < 16) return false;
  if (m == 0) return true;
  const uint32_t align_bias = bias ? gemm_alignment_of(bias) : 16u;
  const ScaledKey key{m, n, k, out, accumulate, bias != nullptr, gemm_alignment_of(y), align_bias};
  auto [it, fresh] = impl_->scaled_plans.try_emplace(key);
  if (fresh) it->second = impl_->make_scaled_plan(key, a_scale, b_scale, bias);
  if (!it->second) return false;
  Plan& p = *it->second;
  set_attr(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(b_scale));
  set_attr(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(a_scale));
  if (bias) set_attr(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  auto matmul = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(impl_->handle, p.op, &alpha, b, p.a, a, p.b, &beta, y, p.d, y, p.d, &algo, impl_->workspace,
                          impl_->workspace_bytes, stream);
  };
  // Timed only where each run writes the same y (not accumulating); an accumulating shape takes its bucket's
  // choice once a non-accumulating call (time_fused's, into scratch) has timed it.
  impl_->settle(p, key, !accumulate, stream, matmul);
  const cublasStatus_t rc = matmul(p.algo);
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED) {  // refused before launching: y is untouched
    it->second.reset();
    return false;
  }
  CONVEYOR_CUBLAS_CHECK(rc);
  return true;
}

}  // namespace conveyor
