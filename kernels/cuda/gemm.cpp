// GemmRunner (see gemm.h). Row-major y = x w^T is the column-major product D[n, m] = op(A) * B with
// A = w read as column-major [k, n] and transposed, B = x read as column-major [k, m] and D = y read
// as column-major [n, m]: no data moves. The bias rides the cuBLASLt epilogue when y has the input
// type (the epilogue takes bias in D's type only); for f32 logits it is a separate add. Accumulate is
// beta = 1 with C = D = y. For m <= kGemvMaxRows the gemv kernel is timed too and wins if faster.
// Above that range one m per power-of-two bucket is timed and the bucket's other m take its choice.
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/launch_timer.h"
#include "kernels/gemm_tuning.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"

namespace conveyor {

uint32_t gemm_alignment_of(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 16;
  while (align > 1 && addr % align != 0) align /= 2;
  return align;
}

namespace {

constexpr int kCandidates = kGemmTimedCandidates;  // heuristic results timed on first use of a shape
constexpr int kTuneRuns = kGemmTimedRuns;          // timed runs per candidate, after one warm-up
static_assert(kGemmExactTuningRows == kGemvMaxRows, "every m the gemv takes is timed itself");

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kF32: return CUDA_R_32F;
    default: CONVEYOR_THROW("GemmRunner: no cuBLASLt type for dtype ", dtype_name(t));
  }
}

struct ShapeKey {
  int64_t m, n, k;
  DType ab, out;
  bool bias_epilogue;
  bool accumulate;
  uint32_t align_x, align_w, align_y, align_bias;
  bool operator<(const ShapeKey& o) const {
    return std::tie(m, n, k, ab, out, bias_epilogue, accumulate, align_x, align_w, align_y, align_bias) <
           std::tie(o.m, o.n, o.k, o.ab, o.out, o.bias_epilogue, o.accumulate, o.align_x, o.align_w, o.align_y,
                    o.align_bias);
  }
};

// The operands of one call.
struct Operands {
  void* y;
  const void* x;
  const void* w;
  const void* bias;  // nullptr, in the epilogue or added separately
};

template <typename V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const V& value) {
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename V>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const V& value) {
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

// Descriptors for one shape and the implementation picked for it. Owns its cuBLASLt objects.
struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // w
  cublasLtMatrixLayout_t b = nullptr;  // x
  cublasLtMatrixLayout_t d = nullptr;  // y (also C: read with beta = 1 when accumulating)
  cublasLtMatmulHeuristicResult_t candidates[kCandidates] = {};
  int n_candidates = 0;
  cublasLtMatmulAlgo_t algo = {};  // the fastest cuBLASLt candidate (the heuristic's first if untimed)
  int algo_index = 0;
  bool tuned = false;
  bool gemv = false;      // timed faster than every cuBLASLt candidate
  float best_us = -1.f;   // time of the chosen implementation, when timed
  int64_t timed_m = 0;    // the m timed for this shape's bucket (== the shape's m when timed itself)
  ShapeKey key{};         // the shape it plans

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

struct GemmRunner::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;  // cuBLASLt's part of the caller's workspace
  size_t workspace_bytes = 0;
  void* scratch = nullptr;    // the rest: y's copy while timing accumulating shapes
  size_t scratch_bytes = 0;
  LaunchTimer timer;
  bool autotune = true;
  bool gemv_capable = false;  // compute capability >= 8.0
  GemvPolicy gemv_policy = GemvPolicy::kAuto;
  std::map<ShapeKey, std::unique_ptr<Plan>> plans;
  std::map<ShapeKey, const Plan*> timed_buckets;  // the plan timed first in each bucket (m = its bucket)

  ~Impl() {
    plans.clear();
    // Destructors must not throw: errors here are ignored (the context may already be gone).
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  bool gemv_allowed(const ShapeKey& key) const {
    return gemv_capable && gemv_policy != GemvPolicy::kNever && key.m <= kGemvMaxRows;
  }
  // Whether calls of this shape run gemv: forced, or timed faster than cuBLASLt.
  bool uses_gemv(const ShapeKey& key, const Plan& plan) const {
    return gemv_allowed(key) && (gemv_policy == GemvPolicy::kAlways || (plan.tuned && plan.gemv));
  }
  std::unique_ptr<Plan> make_plan(const ShapeKey& key, const void* bias);
  cublasStatus_t heuristic(Plan& plan, const ShapeKey& key, uint32_t reduction_mask) const;
  cublasStatus_t matmul(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const ShapeKey& key, const Operands& o,
                        cudaStream_t stream) const;
  void run_gemv(const ShapeKey& key, const Operands& o, cudaStream_t stream) const {
    gemv_cuda(o.y, key.out, o.x, o.w, o.bias, key.m, key.n, key.k, key.accumulate, key.ab, stream);
  }
  void tune(Plan& plan, const ShapeKey& key, Operands o, cudaStream_t stream);
  // Takes the cuBLASLt algorithm timed for key's bucket, if there is one and cuBLASLt accepts it for
  // this exact shape; true when the plan is now tuned. (Up to kGemvMaxRows a bucket is one m, so a
  // timed gemv choice is never another shape's.)
  bool adopt_bucket(Plan& plan, const ShapeKey& key) const;
};

namespace {
ShapeKey bucket_key(ShapeKey key) {
  key.m = gemm_tuning_bucket(key.m);
  return key;
}
}  // namespace

bool GemmRunner::Impl::adopt_bucket(Plan& plan, const ShapeKey& key) const {
  const auto it = timed_buckets.find(bucket_key(key));
  if (it == timed_buckets.end()) return false;
  const Plan& timed = *it->second;
  cublasLtMatmulHeuristicResult_t check = {};
  if (cublasLtMatmulAlgoCheck(handle, plan.op, plan.a, plan.b, plan.d, plan.d, &timed.algo, &check) !=
          CUBLAS_STATUS_SUCCESS ||
      check.workspaceSize > workspace_bytes)
    return false;
  plan.algo = timed.algo;
  plan.algo_index = timed.algo_index;
  plan.timed_m = timed.timed_m;
  plan.tuned = true;
  return true;
}

std::unique_ptr<GemmRunner::Plan> GemmRunner::Impl::make_plan(const ShapeKey& key, const void* bias) {
  auto plan = std::make_unique<Plan>();
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
  if (key.bias_epilogue) {
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<int32_t>(CUBLASLT_EPILOGUE_BIAS));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(key.out)));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads its alignment
  }
  const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, cuda_type(key.ab), k, n, static_cast<int64_t>(k)));
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, cuda_type(key.ab), k, m, static_cast<int64_t>(k)));
  CONVEYOR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, cuda_type(key.out), n, m, static_cast<int64_t>(n)));

  // Split-K partial sums are kept in fp32 (the compute type): reducing them in a bf16 output would
  // round every partial. Only if no such algorithm exists are the other schemes allowed.
  cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
  int usable = 0;
  for (uint32_t mask : {static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                        static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK)}) {
    rc = heuristic(*plan, key, mask);
    // Keep only usable candidates, in the heuristic's order (best first).
    usable = 0;
    for (int i = 0; rc == CUBLAS_STATUS_SUCCESS && i < plan->n_candidates; ++i) {
      if (plan->candidates[i].state == CUBLAS_STATUS_SUCCESS) plan->candidates[usable++] = plan->candidates[i];
    }
    plan->n_candidates = usable;
    if (usable > 0) break;
  }
  CONVEYOR_CHECK(usable > 0, "GemmRunner: cuBLASLt has no algorithm for y[", key.m, ", ", key.n, "] (",
                 dtype_name(key.out), ") = x[", key.m, ", ", key.k, "] * w[", key.n, ", ", key.k, "]^T (",
                 dtype_name(key.ab), key.bias_epilogue ? ", bias epilogue" : "", "; alignments x/w/y/bias ",
                 key.align_x, "/", key.align_w, "/", key.align_y, "/", key.align_bias,
                 " bytes; heuristic status ", cublasLtGetStatusName(rc),
                 "). Use 16-byte aligned buffers and dimensions that are multiples of 8.");
  plan->algo = plan->candidates[0].algo;
  return plan;
}

cublasStatus_t GemmRunner::Impl::heuristic(Plan& plan, const ShapeKey& key, uint32_t reduction_mask) const {
  cublasLtMatmulPreference_t pref = nullptr;
  CONVEYOR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasStatus_t rc = CUBLAS_STATUS_SUCCESS;
  try {
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction_mask);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y);
    rc = cublasLtMatmulAlgoGetHeuristic(handle, plan.op, plan.a, plan.b, plan.d, plan.d, pref, kCandidates,
                                        plan.candidates, &plan.n_candidates);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (rc != CUBLAS_STATUS_SUCCESS) plan.n_candidates = 0;
  return rc;
}

// cuBLASLt with `algo`, plus the separate bias add when the epilogue cannot take the bias.
cublasStatus_t GemmRunner::Impl::matmul(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const ShapeKey& key,
                                        const Operands& o, cudaStream_t stream) const {
  const float alpha = 1.f;
  const float beta = key.accumulate ? 1.f : 0.f;
  const cublasStatus_t rc = cublasLtMatmul(handle, plan.op, &alpha, o.w, plan.a, o.x, plan.b, &beta, o.y, plan.d, o.y,
                                           plan.d, &algo, workspace, workspace_bytes, stream);
  if (rc == CUBLAS_STATUS_SUCCESS && o.bias != nullptr && !key.bias_epilogue) {
    add_bias_cuda(o.y, key.out, o.bias, key.ab, key.m, key.n, stream);
  }
  return rc;
}

// Times every cuBLASLt candidate and, when allowed, gemv; keeps the fastest cuBLASLt algorithm in
// plan.algo and whether gemv beat it. A candidate that fails to launch is skipped; if all fail, the
// heuristic's first stays and the real run reports. Accumulating runs write a scratch copy of y so
// the caller's y is added to exactly once.
// Decode shapes (m <= kGemvMaxRows) are timed with their operands cold (launch_timer.h, ColdL2): run after run
// the same weights would sit in the L2, where cuBLASLt's kernels keep them and the gemv, which streams its weights
// with the evict-first hint, does not; a decode step meets them in DRAM.
void GemmRunner::Impl::tune(Plan& plan, const ShapeKey& key, Operands o, cudaStream_t stream) {
  const ColdL2* cold = key.m <= kGemvMaxRows ? &cold_l2() : nullptr;
  if (key.accumulate) {
    const size_t bytes = static_cast<size_t>(key.m) * static_cast<size_t>(key.n) * dtype_size(key.out);
    CONVEYOR_CHECK(bytes <= scratch_bytes, "GemmRunner: timing the accumulating shape m=", key.m, " n=", key.n,
                   " needs ", bytes, " bytes of scratch, the workspace holds ", scratch_bytes,
                   "; size it with gemm_workspace_bytes for the largest step's tokens and width");
    CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(scratch, o.y, bytes, cudaMemcpyDeviceToDevice, stream));
    o.y = scratch;
  }
  auto [index, best] = timer.fastest(
      plan.n_candidates,
      [&](int i) { return matmul(plan, plan.candidates[i].algo, key, o, stream) == CUBLAS_STATUS_SUCCESS; },
      kTuneRuns, stream, cold);
  if (index >= 0) plan.algo = plan.candidates[index].algo, plan.algo_index = index;
  if (gemv_allowed(key)) {
    const float us = timer.us_where(
        [&] {
          run_gemv(key, o, stream);
          return true;
        },
        kTuneRuns, stream, cold);
    plan.gemv = us < best;
    if (plan.gemv) best = us;
  }
  plan.best_us = best < std::numeric_limits<float>::infinity() ? best : -1.f;
  plan.timed_m = key.m;
  plan.tuned = true;
  timed_buckets.emplace(bucket_key(key), &plan);
}

size_t gemm_workspace_bytes(int64_t max_m, int64_t max_accumulate_n, size_t lt_bytes) {
  CONVEYOR_CHECK(max_m >= 0 && max_accumulate_n >= 0, "gemm_workspace_bytes: bad sizes m=", max_m, " n=",
                 max_accumulate_n);
  return WorkspaceCarver::align(lt_bytes) +
         static_cast<size_t>(max_m) * static_cast<size_t>(max_accumulate_n) * dtype_size(DType::kBF16);
}

GemmRunner::GemmRunner(void* workspace, size_t workspace_bytes, size_t lt_bytes) : impl_(std::make_unique<Impl>()) {
  const size_t lt_part = WorkspaceCarver::align(lt_bytes);
  CONVEYOR_CHECK(workspace_bytes >= lt_part && (workspace != nullptr || workspace_bytes == 0),
                 "GemmRunner: a workspace of ", workspace_bytes, " bytes at ", workspace, " cannot hold cuBLASLt's ",
                 lt_bytes, "; allocate gemm_workspace_bytes(...) bytes at start-up and pass them in");
  impl_->workspace = lt_bytes > 0 ? workspace : nullptr;
  impl_->workspace_bytes = lt_bytes;
  impl_->scratch_bytes = workspace_bytes - lt_part;
  impl_->scratch = impl_->scratch_bytes > 0 ? static_cast<char*>(workspace) + lt_part : nullptr;
  CONVEYOR_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  int device = 0, major = 0;
  CONVEYOR_CUDA_CHECK(cudaGetDevice(&device));
  CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  impl_->gemv_capable = major >= 8;
}

GemmRunner::~GemmRunner() = default;

void GemmRunner::set_autotune(bool on) { impl_->autotune = on; }

void GemmRunner::set_gemv_policy(GemvPolicy policy) { impl_->gemv_policy = policy; }

size_t GemmRunner::cached_shapes() const { return impl_->plans.size(); }

std::string GemmRunner::describe() const {
  std::string out;
  for (const auto& [key, plan] : impl_->plans) {
    char line[256];
    char choice[96];
    if (impl_->uses_gemv(key, *plan)) {
      std::snprintf(choice, sizeof(choice), "gemv");
    } else {
      std::snprintf(choice, sizeof(choice), "cublaslt %s %d/%d", plan->tuned ? "algo" : "heuristic",
                    plan->algo_index, plan->n_candidates);
    }
    char timing[48] = "untimed";
    if (plan->tuned && plan->best_us >= 0.f) std::snprintf(timing, sizeof(timing), "%.1f us", plan->best_us);
    if (plan->tuned && plan->timed_m != key.m)
      std::snprintf(timing, sizeof(timing), "as timed at m=%lld", static_cast<long long>(plan->timed_m));
    std::snprintf(line, sizeof(line), "m=%lld n=%lld k=%lld %s->%s%s%s: %s (%s)\n", static_cast<long long>(key.m),
                  static_cast<long long>(key.n), static_cast<long long>(key.k), dtype_name(key.ab),
                  dtype_name(key.out), key.bias_epilogue ? " bias" : "", key.accumulate ? " acc" : "", choice, timing);
    out += line;
  }
  return out;
}

// The checks of run() and picks_gemv(), then the shape's plan, timed on first use where allowed; nullptr for m = 0.
GemmRunner::Plan* GemmRunner::planned(void* y, DType out, const void* x, const void* w, DType ab, const void* bias,
                                      int64_t m, int64_t n, int64_t k, cudaStream_t stream, bool accumulate) {
  CONVEYOR_CHECK(ab == DType::kBF16 || ab == DType::kF16, "GemmRunner::run: input dtype ", dtype_name(ab),
                 " is not supported; x and w must be bf16 or f16");
  CONVEYOR_CHECK(out == ab || out == DType::kF32, "GemmRunner::run: output dtype ", dtype_name(out),
                 " with inputs in ", dtype_name(ab), "; the output must be ", dtype_name(ab), " or f32");
  CONVEYOR_CHECK(!accumulate || out == ab, "GemmRunner::run: accumulate (y += x w^T) needs y in the input dtype ",
                 dtype_name(ab), ", not ", dtype_name(out), " (shape m=", m, " n=", n, " k=", k,
                 "); add an f32 result separately");
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  CONVEYOR_CHECK(m >= 0 && m <= kMaxDim && n > 0 && n <= kMaxDim && k > 0 && k <= kMaxDim,
                 "GemmRunner::run: bad shape m=", m, " n=", n, " k=", k, " (need 0 <= m, 0 < n, k < 2^31)");
  CONVEYOR_CHECK(k % 8 == 0, "GemmRunner::run: k=", k, " is not a multiple of 8 (shape m=", m, " n=", n,
                 "); tensor-core GEMMs need 16-byte rows of x and w: pad the input dimension to a multiple of 8");
  if (m == 0) return nullptr;
  CONVEYOR_CHECK(y != nullptr && x != nullptr && w != nullptr, "GemmRunner::run: null device pointer (y, x or w)");
  CONVEYOR_CHECK(gemm_alignment_of(x) == 16 && gemm_alignment_of(w) == 16, "GemmRunner::run: x (", x, ") and w (", w,
                 ") must be 16-byte aligned; allocate them with cudaMalloc or offset views by multiples of 16 bytes");

  const bool bias_epilogue = bias != nullptr && out == ab;
  const ShapeKey key{m, n, k, ab, out, bias_epilogue, accumulate, gemm_alignment_of(x), gemm_alignment_of(w),
                     gemm_alignment_of(y), bias_epilogue ? gemm_alignment_of(bias) : 16u};
  auto it = impl_->plans.find(key);
  if (it == impl_->plans.end()) {
    it = impl_->plans.emplace(key, impl_->make_plan(key, bias)).first;
    it->second->key = key;
  }
  Plan& plan = *it->second;
  if (bias_epilogue) set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const Operands ops{y, x, w, bias};

  const bool gemv_timed = impl_->gemv_allowed(key) && impl_->gemv_policy == GemvPolicy::kAuto;
  if (!plan.tuned && impl_->autotune && (plan.n_candidates > 1 || gemv_timed) && !impl_->adopt_bucket(plan, key)) {
    // Timing waits on the stream, which a stream being captured into a graph must not do.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CONVEYOR_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone) impl_->tune(plan, key, ops, stream);
  }
  return &plan;
}

void GemmRunner::run(void* y, DType out, const void* x, const void* w, DType ab, const void* bias, int64_t m,
                     int64_t n, int64_t k, cudaStream_t stream, bool accumulate) {
  Plan* plan = planned(y, out, x, w, ab, bias, m, n, k, stream, accumulate);
  if (plan == nullptr) return;
  const Operands ops{y, x, w, bias};
  if (impl_->uses_gemv(plan->key, *plan)) {
    impl_->run_gemv(plan->key, ops, stream);
    return;
  }
  CONVEYOR_CUBLAS_CHECK(impl_->matmul(*plan, plan->algo, plan->key, ops, stream));
}

bool GemmRunner::picks_gemv(void* y, DType out, const void* x, const void* w, DType ab, const void* bias, int64_t m,
                            int64_t n, int64_t k, cudaStream_t stream, bool accumulate) {
  const Plan* plan = planned(y, out, x, w, ab, bias, m, n, k, stream, accumulate);
  return plan != nullptr && impl_->uses_gemv(plan->key, *plan);
}

}  // namespace conveyor
