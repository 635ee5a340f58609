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

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
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

  const Plan& plan(int64_t m, int64_t n, int64_t k) {
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
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    const cublasStatus_t rc =
        cublasLtMatmulAlgoGetHeuristic(handle, p->op, p->a, p->b, p->d, p->d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CONVEYOR_CHECK(rc == CUBLAS_STATUS_SUCCESS && found > 0, "Fp8GemmRunner: cuBLASLt has no e4m3 algorithm for [",
                   m, ", ", k, "] x [", n, ", ", k, "]^T -> f32 (status ", cublasLtGetStatusName(rc),
                   "); FP8 needs k % 16 == 0, n % 4 == 0, 16-byte aligned buffers and an sm_89+ GPU");
    p->algo = result.algo;
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
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  const cublasStatus_t rc =
      cublasLtMatmulAlgoGetHeuristic(handle, p->op, p->a, p->b, p->d, p->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (rc != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) return nullptr;
  p->algo = result.algo;
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
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CONVEYOR_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return true;
  return std::nullopt;
}

std::optional<bool> Fp8GemmRunner::fused_choice(int64_t m, int64_t n, int64_t k, cudaStream_t stream) const {
  if (auto it = impl_->fused.find({gemm_tuning_bucket(m), n, k}); it != impl_->fused.end()) return it->second.fused();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CONVEYOR_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return false;  // the path this runner had before fusing
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
  return out.str();
}

void Fp8GemmRunner::run(float* acc, const uint8_t* a, const uint8_t* b, int64_t m, int64_t n, int64_t k,
                        cudaStream_t stream) {
  CONVEYOR_CHECK(k % 16 == 0 && n % 4 == 0, "Fp8GemmRunner: [", m, ", ", k, "] x [", n, ", ", k,
                 "]^T: FP8 GEMMs need k % 16 == 0 and n % 4 == 0");
  if (m == 0) return;
  const Plan& p = impl_->plan(m, n, k);
  const float alpha = 1.f, beta = 0.f;
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, p.op, &alpha, b, p.a, a, p.b, &beta, acc, p.d, acc, p.d,
                                       &p.algo, impl_->workspace, impl_->workspace_bytes, stream));
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
  const Plan& p = *it->second;
  set_attr(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(b_scale));
  set_attr(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(a_scale));
  if (bias) set_attr(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  const cublasStatus_t rc = cublasLtMatmul(impl_->handle, p.op, &alpha, b, p.a, a, p.b, &beta, y, p.d, y, p.d,
                                           &p.algo, impl_->workspace, impl_->workspace_bytes, stream);
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED) {  // refused before launching: y is untouched
    it->second.reset();
    return false;
  }
  CONVEYOR_CUBLAS_CHECK(rc);
  return true;
}

}  // namespace conveyor
