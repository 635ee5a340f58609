// CudaOps (see cuda_ops.h). Shapes and dtypes are checked on the host once per op, as cpu_ops.cpp
// does, so a wiring mistake is an Error naming the op, never a kernel reading out of bounds. Per-step
// metadata goes up in ONE async copy from pinned memory in set_batch; rope's inv_freq is uploaded once
// per rope rule (dynamic NTK: once per step, per sequence, only when a sequence passes the limit).
// Graphs: set_batch_fixed writes the metadata to a buffer fixed per layout, attention sizes its grid
// for the block stride's context and reads the exact one from device memory, and captured ops draw
// activations from a pool of their own (graph_pool_) and the split-K workspace from a fixed buffer.
#include "stages/cuda/cuda_ops.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <cuda_profiler_api.h>

#include "kernels/cpu/rope.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "stages/cuda/cuda_fp8_linear.h"
#include "stages/cuda/cuda_fused_linear.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/silu_mul.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"
#include "stages/cuda/cuda_memory.h"
#include "stages/cuda/cuda_transfer_streams.h"
#include "stages/cuda/step_metadata.h"

namespace conveyor {
namespace {

void check_view(const TensorView& t, DType dt, const char* op, const char* what) {
  CONVEYOR_CHECK(t.data != nullptr || t.numel() == 0, "cuda ", op, ": ", what, " has no data");
  CONVEYOR_CHECK(t.dtype == dt, "cuda ", op, ": ", what, " is ", dtype_name(t.dtype), ", expected ", dtype_name(dt));
}

void check_shape(const TensorView& t, int64_t rows, int64_t cols, DType dt, const char* op, const char* what) {
  check_view(t, dt, op, what);
  CONVEYOR_CHECK(t.rows == rows && t.cols == cols, "cuda ", op, ": ", what, " is [", t.rows, ", ", t.cols,
                 "], expected [", rows, ", ", cols, "]");
}

constexpr int kMaxHeadDim = 256;  // the attention kernels' limit (kernels/cuda/attention.h)

// What the kernels need to know of a layer's pools: FP8 codes with their scales, or the activation dtype.
KvCacheFormat kv_format(const KvLayerView& cache) { return KvCacheFormat{cache.fp8(), cache.scales}; }

// The largest split-K workspace any paged-attention launch takes (it is capped by kTargetRows).
size_t attention_workspace_bytes() { return paged_attention_workspace_bytes(1 << 20, 1 << 10, kMaxHeadDim, 1 << 30); }

// Host fp32 -> dt bits, for weights (once, at load).
// Into `out`, whose capacity is kept from one weight to the next (the load's pages fault once).
void to_half_bits(const std::vector<float>& src, DType dt, std::vector<uint16_t>& out) {
  out.resize(src.size());
  const int64_t n = static_cast<int64_t>(src.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = dt == DType::kBF16 ? float_to_bf16(src[static_cast<size_t>(i)])
                                                     : float_to_f16(src[static_cast<size_t>(i)]);
}

// An FP8 linear after a norm or the SwiGLU takes its codes from that op's kernel (fp8.h's fused quantizers;
// round 11 on an H100: bit for bit the two kernels' codes, batch 1 FP8 0.5584 s with them and 0.5585 s
// without). CONVEYOR_FUSED_FP8_INPUT=0 quantizes the input in a kernel of its own, for A/B timings. Read once.
bool fused_fp8_input() {
  static const bool on = env_switch_on("CONVEYOR_FUSED_FP8_INPUT");
  return on;
}

class CudaOps final : public Ops {
 public:
  CudaOps(int device, DType dt, const CudaOpsSizes& sizes) : device_(device), dt_(dt), meta_(sizes.metadata) {
    CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16, "the CUDA backend computes in bf16 or f16, not ",
                   dtype_name(dt), "; set model.dtype to bfloat16 or float16");
    CONVEYOR_CUDA_CHECK(cudaSetDevice(device));
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    transfer_ = std::make_unique<CudaTransferStreams>();
    // Every workspace a step uses is allocated here, once: the launchers take them.
    gemm_workspace_ = CudaBuffer(gemm_workspace_bytes(sizes.metadata.max_tokens, sizes.max_accumulate_cols), "the GEMM workspace");
    gemm_ = std::make_unique<GemmRunner>(gemm_workspace_.data(), gemm_workspace_.bytes());
    // Same stream as gemm_, so the two take turns in cuBLASLt's part of one workspace.
    fp8_gemm_ = std::make_unique<Fp8GemmRunner>(gemm_workspace_.data(), kGemmLtWorkspaceBytes);
    fp8_gemm_->set_gemv_policy(sizes.fp8_gemv);
    attention_workspace_ = CudaBuffer(attention_workspace_bytes(), "the attention workspace");
    pool_ = std::make_shared<DevicePool>(sizes.activation_pool_bytes);
    graph_pool_ = std::make_shared<DevicePool>(sizes.graph_pool_bytes);
  }

  ~CudaOps() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  bool supports_graphs() const override { return true; }
  bool tunes_on_first_use() const override { return true; }
  std::string describe_gemms() const override { return gemm_->describe() + fp8_gemm_->describe(); }
  bool graph_safe(const BatchInfo& b) const override;
  void set_batch_fixed(const BatchInfo& b) override { stage_batch(b, true); }
  std::unique_ptr<OpsGraph> capture(const std::function<void()>& body) override;

  DType dtype() const override { return dt_; }
  void* stream() const override { return stream_; }
  void* comm_stream() const override { return transfer_->comm(); }
  void order_after(void* waiter, void* signaller) override {
    transfer_->order_after(static_cast<cudaStream_t>(waiter), static_cast<cudaStream_t>(signaller));
  }
  int64_t mark(void* s) override { return transfer_->mark(static_cast<cudaStream_t>(s)); }
  double mark_seconds(int64_t id) override { return transfer_->seconds(id); }
  void restart_marks() override { transfer_->restart(stream_); }
  void set_profiling(bool on) override {
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    CONVEYOR_CUDA_CHECK(on ? cudaProfilerStart() : cudaProfilerStop());
  }

  using Ops::empty;
  Tensor empty(int64_t rows, int64_t cols, DType dt) override {
    CONVEYOR_CHECK(rows >= 0 && cols >= 0, "cuda empty: bad shape [", rows, ", ", cols, "]");
    const size_t bytes = static_cast<size_t>(rows * cols) * dtype_size(dt);
    std::shared_ptr<void> block = DevicePool::take(pool_, bytes);
    void* p = block.get();
    return Tensor(std::move(block), TensorView{p, rows, cols, dt});
  }

  Tensor adopt(HostTensor&& w) override {
    CONVEYOR_CHECK(!w.shape.empty() && w.shape.size() <= 2, "cuda adopt: weight '", w.name, "' has ",
                   w.shape.size(), " dimensions, expected 1 or 2");
    const int64_t cols = w.shape.back();
    const int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1;
    CONVEYOR_CHECK(static_cast<int64_t>(w.data.size()) == rows * cols, "cuda adopt: weight '", w.name, "' holds ",
                   w.data.size(), " values for shape [", rows, ", ", cols, "]");
    std::vector<uint16_t>& bits = half_scratch_;
    to_half_bits(w.data, dt_, bits);
    const size_t bytes = bits.size() * sizeof(uint16_t);
    auto buffer = std::make_shared<CudaBuffer>(bytes, ("weight '" + w.name + "'").c_str());
    void* p = buffer->data();
    std::shared_ptr<void> storage(buffer, p);
    // On our stream (ordered before any use), then waited for: `bits` is reused by the next weight.
    // w.data stays with the caller (WeightBank reuses its buffer). Load time only.
    if (bytes > 0) CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(p, bits.data(), bytes, cudaMemcpyHostToDevice, stream_));
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Tensor(std::move(storage), TensorView{p, rows, cols, dt_});
  }

  Tensor adopt_fp8(Fp8HostWeight&& w) override { return upload_fp8_weight(std::move(w), stream_); }
  void end_of_load() override { half_scratch_ = std::vector<uint16_t>(); }

  Tensor upload(const float* host, int64_t rows, int64_t cols) override {
    Tensor staged = empty(rows, cols, DType::kF32);
    const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
    if (bytes > 0)
      CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(staged.view().data, host, bytes, cudaMemcpyHostToDevice, stream_));
    Tensor t = empty(rows, cols);
    if (bytes > 0) convert_cuda(t.view().data, dt_, staged.view().data, DType::kF32, rows * cols, stream_);
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the caller may free `host` on return
    return t;
  }

  void download(const TensorView& t, float* host) override {
    if (t.numel() == 0) return;
    Tensor staged;
    const void* src = t.data;
    if (t.dtype != DType::kF32) {
      staged = empty(t.rows, t.cols, DType::kF32);
      convert_cuda(staged.view().data, DType::kF32, t.data, t.dtype, t.numel(), stream_);
      src = staged.view().data;
    }
    CONVEYOR_CUDA_CHECK(cudaMemcpyAsync(host, src, static_cast<size_t>(t.numel()) * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream_));
    CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void copy_cols(const TensorView& dst, int64_t dst_col, const TensorView& src, int64_t src_col,
                 int64_t cols) override {
    check_view(src, dst.dtype, "copy_cols", "src");
    CONVEYOR_CHECK(dst.rows == src.rows && cols >= 0 && dst_col >= 0 && src_col >= 0 && dst_col + cols <= dst.cols &&
                       src_col + cols <= src.cols,
                   "cuda copy_cols: columns [", src_col, ", +", cols, ") of [", src.rows, ", ", src.cols, "] into [",
                   dst_col, ", +", cols, ") of [", dst.rows, ", ", dst.cols, "] do not fit");
    if (cols == 0 || dst.rows == 0) return;
    const size_t es = dtype_size(dst.dtype);
    CONVEYOR_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst.data) + dst_col * es, dst.cols * es,
                                          static_cast<const char*>(src.data) + src_col * es, src.cols * es,
                                          cols * es, dst.rows, cudaMemcpyDeviceToDevice, stream_));
  }

  using Ops::make_kv_cache;
  std::unique_ptr<KvCache> make_kv_cache(int first_layer, int num_layers, const PagedKvShape& shape,
                                         bool fp8) override {
    const DType storage_dt = fp8 ? DType::kU8 : dt_;  // FP8: e4m3 codes
    const size_t bytes = KvCache::bytes_needed(num_layers, shape, storage_dt);
    auto buffer = std::make_shared<CudaBuffer>(bytes, "the KV cache");
    void* p = buffer->data();
    std::shared_ptr<void> storage(buffer, p);
    CONVEYOR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    return std::make_unique<KvCache>(first_layer, num_layers, shape, storage_dt, std::move(storage));
  }

  void set_batch(const BatchInfo& b) override { stage_batch(b, false); }

  void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) override {
    CONVEYOR_CHECK(static_cast<int>(batch_.token_ids.size()) == batch_.num_tokens(),
                   "cuda embedding: the batch carries no token ids");
    check_shape(out, batch_.num_tokens(), table.cols, dt_, "embedding", "out");
    check_view(table, dt_, "embedding", "table");
    CONVEYOR_CHECK(vocab_start >= 0 && vocab_start + table.rows <= vocab_size, "cuda embedding: shard [",
                   vocab_start, ", ", vocab_start + table.rows, ") is outside the vocabulary of ", vocab_size);
    embedding_cuda(out.data, table.data, d_ids_, out.rows, out.cols, vocab_start, table.rows, dt_, stream_);
  }

  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& w, float eps) override {
    check_shape(x, x.rows, x.cols, dt_, "rms_norm", "x");
    check_shape(out, x.rows, x.cols, dt_, "rms_norm", "out");
    check_shape(w, 1, x.cols, dt_, "rms_norm", "weight");
    rms_norm_cuda(out.data, x.data, w.data, x.rows, x.cols, eps, dt_, stream_);
  }

  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    if (w.fp8()) return fp8_linear_cuda(*this, *fp8_gemm_, out, x, w, bias, false, stream_);
    check_shape(w, out.cols, x.cols, dt_, "linear", "weight");
    check_shape(x, x.rows, x.cols, dt_, "linear", "x");
    CONVEYOR_CHECK(out.dtype == dt_ || out.dtype == DType::kF32, "cuda linear: out is ", dtype_name(out.dtype));
    check_shape(out, x.rows, w.rows, out.dtype, "linear", "out");
    if (bias.data) check_shape(bias, 1, w.rows, dt_, "linear", "bias");
    if (x.rows == 0) return;
    gemm_->run(out.data, out.dtype, x.data, w.data, dt_, bias.data, x.rows, w.rows, x.cols, stream_);
  }

  void linear_add(const TensorView& out, const TensorView& x, const TensorView& w) override {
    if (w.fp8()) return fp8_linear_cuda(*this, *fp8_gemm_, out, x, w, TensorView{}, true, stream_);
    check_shape(w, out.cols, x.cols, dt_, "linear_add", "weight");
    check_shape(x, x.rows, x.cols, dt_, "linear_add", "x");
    check_shape(out, x.rows, w.rows, dt_, "linear_add", "out");
    if (x.rows == 0) return;
    gemm_->run(out.data, dt_, x.data, w.data, dt_, nullptr, x.rows, w.rows, x.cols, stream_, /*accumulate=*/true);
  }

  // With an FP8 w the norm's kernel writes the linear's codes (fp8.h); otherwise the two ops.
  void rms_norm_linear(const TensorView& out, const TensorView& x, const NormView& norm, const TensorView& w,
                       const TensorView& bias) override {
    if (fused_gemv_linear(*gemm_, dt_, out, x, &norm, w, bias, false, stream_)) return;
    if (!w.fp8() || !fused_fp8_input()) return Ops::rms_norm_linear(out, x, norm, w, bias);
    check_shape(x, x.rows, x.cols, dt_, "rms_norm_linear", "x");
    check_shape(norm.weight, 1, x.cols, dt_, "rms_norm_linear", "norm weight");
    auto quantize = [&](uint8_t* codes, float* scales) {
      if (rms_norm_quantize_fp8_cuda(codes, scales, x.data, norm.weight.data, dt_, x.rows, x.cols, norm.eps,
                                     w.input_scale, stream_))
        return;
      Tensor h = empty(x.rows, x.cols);
      rms_norm(h.view(), x, norm.weight, norm.eps);
      quantize_rows_fp8_cuda(codes, scales, h.view().data, dt_, x.rows, x.cols, w.input_scale, stream_);
    };
    fp8_linear_quantized_cuda(*this, *fp8_gemm_, out, x.rows, x.cols, quantize, w, bias, false, stream_);
  }

  // With an FP8 w silu_mul's kernel writes the linear's codes; otherwise the two ops.
  void silu_mul_linear(const TensorView& out, const TensorView& gate_up, const TensorView& w,
                       bool accumulate) override {
    if (fused_gemv_linear(*gemm_, dt_, out, gate_up, nullptr, w, TensorView{}, accumulate, stream_)) return;
    if (!w.fp8() || !fused_fp8_input()) return Ops::silu_mul_linear(out, gate_up, w, accumulate);
    CONVEYOR_CHECK(gate_up.cols % 2 == 0, "cuda silu_mul_linear: gate_up has an odd width ", gate_up.cols);
    check_shape(gate_up, gate_up.rows, gate_up.cols, dt_, "silu_mul_linear", "gate_up");
    const int64_t inter = gate_up.cols / 2;
    auto quantize = [&](uint8_t* codes, float* scales) {
      if (silu_mul_quantize_fp8_cuda(codes, scales, gate_up.data, dt_, gate_up.rows, inter, w.input_scale, stream_))
        return;
      Tensor act = empty(gate_up.rows, inter);
      silu_mul(act.view(), gate_up);
      quantize_rows_fp8_cuda(codes, scales, act.view().data, dt_, gate_up.rows, inter, w.input_scale, stream_);
    };
    fp8_linear_quantized_cuda(*this, *fp8_gemm_, out, gate_up.rows, inter, quantize, w, TensorView{}, accumulate,
                              stream_);
  }

  void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) override;

  void qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache,
                     const AttentionConfig& cfg, const RopeParams& rope_params) override;

  void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvLayerView& cache, const AttentionConfig& cfg) override;

  void silu_mul(const TensorView& out, const TensorView& gate_up) override {
    CONVEYOR_CHECK(gate_up.cols % 2 == 0, "cuda silu_mul: gate_up has an odd width ", gate_up.cols);
    check_shape(gate_up, gate_up.rows, gate_up.cols, dt_, "silu_mul", "gate_up");
    check_shape(out, gate_up.rows, gate_up.cols / 2, dt_, "silu_mul", "out");
    if (out.rows == 0) return;
    silu_mul_cuda(out.data, gate_up.data, out.rows, out.cols, dt_, stream_);
  }

  float abs_max_cols(const TensorView& x, int64_t col, int64_t cols) override {
    check_view(x, dt_, "abs_max_cols", "x");
    Tensor bits = empty(1, 1, DType::kF32);  // the float's bits, which order like uint32 for |x|
    CONVEYOR_CUDA_CHECK(cudaMemsetAsync(bits.view().data, 0, sizeof(float), stream_));
    abs_max_cols_cuda(static_cast<uint32_t*>(bits.view().data), x.data, x.rows, x.cols, col, cols, x.dtype, stream_);
    float m = 0;
    download(bits.view(), &m);
    return m;
  }

  void add(const TensorView& out, const TensorView& a, const TensorView& b) override {
    check_shape(out, out.rows, out.cols, dt_, "add", "out");
    check_shape(a, out.rows, out.cols, dt_, "add", "a");
    check_shape(b, out.rows, out.cols, dt_, "add", "b");
    add_cuda(out.data, a.data, b.data, out.numel(), dt_, stream_);
  }

  void gather_logit_rows(const TensorView& out, const TensorView& x) override {
    check_shape(out, static_cast<int64_t>(batch_.logit_rows.size()), x.cols, dt_, "gather_logit_rows", "out");
    check_view(x, dt_, "gather_logit_rows", "x");
    for (int32_t r : batch_.logit_rows)
      CONVEYOR_CHECK(r >= 0 && r < x.rows, "cuda gather_logit_rows: row ", r, " outside [0, ", x.rows, ")");
    if (out.rows == 0) return;
    gather_rows_cuda(out.data, x.data, d_logit_rows_, out.rows, out.cols, dt_, stream_);
  }

 private:
  void stage_batch(const BatchInfo& b, bool fixed);
  const float* inv_freq_for_rope(const RopeParams& p);
  bool rope_scaled(const RopeParams& p);
  void check_attention(const TensorView& out, int64_t q_cols, const KvLayerView& cache, const AttentionConfig& cfg);
  void paged_attention(const TensorView& out, const TensorView& q, const KvLayerView& cache, const AttentionConfig& cfg);
  const float* dynamic_inv_freq(const RopeTable& table, int half);

  int device_;
  DType dt_;
  cudaStream_t stream_ = nullptr;
  std::vector<uint16_t> half_scratch_;  // adopt's bf16/f16 bits, reused by every weight until end_of_load
  CudaBuffer gemm_workspace_;       // declared before gemm_: outlives the runner that uses it
  std::unique_ptr<GemmRunner> gemm_;
  std::unique_ptr<Fp8GemmRunner> fp8_gemm_;
  CudaBuffer attention_workspace_;  // split-K partials, sized for any launch (fixed address for graphs)
  std::shared_ptr<DevicePool> pool_;
  std::shared_ptr<DevicePool> graph_pool_;  // swapped in while capturing
  std::unique_ptr<CudaTransferStreams> transfer_;  // made in the constructor, on this device

  // The step's metadata on the device (step_metadata.h), sized at start-up.
  StepMetadata meta_;
  const int32_t* d_ids_ = nullptr;
  const int32_t* d_logit_rows_ = nullptr;
  AttentionBatchCuda ab_;
  bool fixed_ = false;  // the last batch came from set_batch_fixed

  // Rope: the host table and its static inv_freq on the device; per-sequence dynamic ones per step.
  std::unique_ptr<RopeTable> rope_;
  RopeParams rope_params_;
  GrowingBuffer rope_static_;
  PinnedRing rope_staging_;
  GrowingBuffer rope_dynamic_;
  bool dynamic_ready_ = false;  // rope_dynamic_ holds this step's per-sequence inv_freq
};

void CudaOps::stage_batch(const BatchInfo& b, bool fixed) {
  validate_batch(b, "cuda");
  batch_ = b;
  fixed_ = fixed;
  dynamic_ready_ = false;
  int32_t max_context = 0;
  for (int32_t len : b.rope_seq_len) max_context = std::max(max_context, len);
  const StepMetadataOnDevice dev = meta_.upload(b, max_context, fixed, stream_);
  d_ids_ = dev.token_ids;
  d_logit_rows_ = dev.logit_rows;
  ab_ = AttentionBatchCuda{};
  ab_.num_seqs = b.num_seqs();
  ab_.num_tokens = b.num_tokens();
  ab_.positions = dev.positions;
  ab_.query_start = dev.query_start;
  ab_.block_tables = dev.block_tables;
  ab_.max_blocks_per_seq = b.max_blocks;
  ab_.max_context_len = max_context;
  ab_.max_context_len_dev = dev.max_context_len;
  for (int s = 0; s < b.num_seqs(); ++s)
    ab_.max_query_len = std::max(ab_.max_query_len, b.query_start[s + 1] - b.query_start[s]);
}

bool CudaOps::graph_safe(const BatchInfo& b) const {
  if (!rope_) return false;  // no step has run yet: the rope tables are uploaded eagerly first
  if (!rope_->is_dynamic()) return true;
  for (int32_t len : b.rope_seq_len)
    if (len > rope_params_.max_position_embeddings) return false;  // per-sequence launches (rope())
  return true;
}

class CudaGraph final : public OpsGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override {
    cudaStreamSynchronize(stream_);  // an evicted graph may still be running
    cudaGraphExecDestroy(exec_);
  }
  void replay() override { CONVEYOR_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

std::unique_ptr<OpsGraph> CudaOps::capture(const std::function<void()>& body) {
  CONVEYOR_CHECK(fixed_, "internal: cuda capture needs the metadata of set_batch_fixed");
  std::swap(pool_, graph_pool_);
  // Relaxed: a capture on this stream does not forbid other threads' CUDA calls (sampler, NCCL).
  CONVEYOR_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    std::swap(pool_, graph_pool_);
    throw;
  }
  const cudaError_t rc = cudaStreamEndCapture(stream_, &graph);
  std::swap(pool_, graph_pool_);
  CONVEYOR_CUDA_CHECK(rc);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t irc = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CONVEYOR_CUDA_CHECK(irc);
  return std::make_unique<CudaGraph>(exec, stream_);
}

const float* CudaOps::inv_freq_for_rope(const RopeParams& p) {
  if (!rope_ || !same_rope(p, rope_params_)) {
    rope_ = make_rope_table(p);
    rope_params_ = p;
    const std::vector<float>& f = rope_->static_inv_freq();
    void* d = rope_static_.reserve(f.size() * sizeof(float), stream_);
    void* h = rope_staging_.acquire(f.size() * sizeof(float));
    std::memcpy(h, f.data(), f.size() * sizeof(float));
    rope_staging_.copy_to_device(d, f.size() * sizeof(float), stream_);
    dynamic_ready_ = false;
  }
  return static_cast<const float*>(rope_static_.data());
}

// [num_seqs, half] inv_freq, row s for rope_seq_len[s] (uploaded once per step).
const float* CudaOps::dynamic_inv_freq(const RopeTable& table, int half) {
  const size_t bytes = static_cast<size_t>(batch_.num_seqs()) * half * sizeof(float);
  if (!dynamic_ready_) {
    auto* h = static_cast<float*>(rope_staging_.acquire(bytes));
    for (int s = 0; s < batch_.num_seqs(); ++s) table.inv_freq_for(batch_.rope_seq_len[s], h + static_cast<size_t>(s) * half);
    rope_staging_.copy_to_device(rope_dynamic_.reserve(bytes, stream_), bytes, stream_);
    dynamic_ready_ = true;
  }
  return static_cast<const float*>(rope_dynamic_.data());
}

// Dynamic NTK changes nothing until a sequence passes max_position_embeddings; then each sequence
// rotates with its own table (per-sequence launches in rope()).
bool CudaOps::rope_scaled(const RopeParams& p) {
  inv_freq_for_rope(p);
  if (!rope_->is_dynamic()) return false;
  for (int32_t len : batch_.rope_seq_len)
    if (len > p.max_position_embeddings) return true;
  return false;
}

void CudaOps::rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) {
  const int tokens = batch_.num_tokens();
  check_shape(q, tokens, static_cast<int64_t>(n_heads) * p.head_dim, dt_, "rope", "q");
  check_shape(k, tokens, static_cast<int64_t>(n_kv_heads) * p.head_dim, dt_, "rope", "k");
  const float* freq = inv_freq_for_rope(p);
  if (!rope_scaled(p)) {
    rope_cuda(q.data, k.data, ab_.positions, freq, tokens, n_heads, n_kv_heads, p.head_dim, dt_, stream_);
    return;
  }
  // Each sequence rotates with its own seq_len, as cpu_ops.cpp does.
  const int half = p.head_dim / 2;
  const float* per_seq = dynamic_inv_freq(*rope_, half);
  const size_t es = dtype_size(dt_);
  for (int s = 0; s < batch_.num_seqs(); ++s) {
    const int begin = batch_.query_start[s];
    const int n = batch_.query_start[s + 1] - begin;
    if (n == 0) continue;
    rope_cuda(static_cast<char*>(q.data) + static_cast<size_t>(begin) * q.cols * es,
              static_cast<char*>(k.data) + static_cast<size_t>(begin) * k.cols * es, ab_.positions + begin,
              per_seq + static_cast<size_t>(s) * half, n, n_heads, n_kv_heads, p.head_dim, dt_, stream_);
  }
}

void CudaOps::check_attention(const TensorView& out, int64_t q_cols, const KvLayerView& cache,
                              const AttentionConfig& cfg) {
  check_shape(out, batch_.num_tokens(), q_cols, dt_, "attention", "out");
  CONVEYOR_CHECK(q_cols == static_cast<int64_t>(cfg.n_heads) * cfg.head_dim, "cuda attention: q has ", q_cols,
                 " columns for ", cfg.n_heads, " heads of ", cfg.head_dim);
  CONVEYOR_CHECK((cache.dtype == dt_ || cache.fp8()) && cache.k && cache.v, "cuda attention: the KV cache is ",
                 dtype_name(cache.dtype), ", expected ", dtype_name(dt_), " or FP8 (u8) device memory");
  CONVEYOR_CHECK(cache.shape.n_kv_heads == cfg.n_kv_heads && cache.shape.head_dim == cfg.head_dim,
                 "cuda attention: the KV cache holds ", cache.shape.n_kv_heads, " heads of ", cache.shape.head_dim,
                 ", the layer has ", cfg.n_kv_heads, " of ", cfg.head_dim);
  for (int32_t id : batch_.block_tables)
    CONVEYOR_CHECK(id < cache.shape.num_blocks, "cuda attention: block ", id, " outside the pool of ",
                   cache.shape.num_blocks);
}

void CudaOps::attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                        const KvLayerView& cache, const AttentionConfig& cfg) {
  const int tokens = batch_.num_tokens();
  check_shape(q, tokens, static_cast<int64_t>(cfg.n_heads) * cfg.head_dim, dt_, "attention", "q");
  check_shape(k, tokens, static_cast<int64_t>(cfg.n_kv_heads) * cfg.head_dim, dt_, "attention", "k");
  check_shape(v, tokens, k.cols, dt_, "attention", "v");
  check_attention(out, q.cols, cache, cfg);
  if (tokens == 0) return;
  write_kv_cache_cuda(cache.k, cache.v, k.data, v.data, ab_, cache.shape, dt_, stream_, kv_format(cache));
  paged_attention(out, q, cache, cfg);
}

// One kernel splits qkv, rotates q into a scratch tensor and writes rotated k and v into the cache;
// then the paged kernels. Past a dynamic-NTK limit the per-sequence rope path of the default runs.
void CudaOps::qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache,
                            const AttentionConfig& cfg, const RopeParams& rope_params) {
  const int tokens = batch_.num_tokens();
  const int64_t q_cols = static_cast<int64_t>(cfg.n_heads) * cfg.head_dim;
  check_shape(qkv, tokens, q_cols + 2 * static_cast<int64_t>(cfg.n_kv_heads) * cfg.head_dim, dt_, "qkv_attention",
              "qkv");
  CONVEYOR_CHECK(rope_params.head_dim == cfg.head_dim, "cuda qkv_attention: rope head_dim ", rope_params.head_dim,
                 " differs from the layer's ", cfg.head_dim);
  if (rope_scaled(rope_params)) return Ops::qkv_attention(out, qkv, cache, cfg, rope_params);
  check_attention(out, q_cols, cache, cfg);
  if (tokens == 0) return;
  Tensor q = empty(tokens, q_cols);
  rope_qkv_write_kv_cuda(q.view().data, qkv.data, cache.k, cache.v, inv_freq_for_rope(rope_params), ab_, cache.shape,
                         cfg.n_heads, dt_, stream_, kv_format(cache));
  paged_attention(out, q.view(), cache, cfg);
}

void CudaOps::paged_attention(const TensorView& out, const TensorView& q, const KvLayerView& cache,
                              const AttentionConfig& cfg) {
  const int tokens = batch_.num_tokens();
  AttentionParams ap;
  ap.n_heads = cfg.n_heads;
  ap.scale = cfg.scale;
  ap.sliding_window = cfg.sliding_window;
  AttentionBatchCuda ab = ab_;
  if (fixed_) {
    // The launch (grid, workspace) must suit every step of this layout: size it for the longest
    // context the block stride allows; the kernels split by the exact one (ab.max_context_len_dev).
    ab.max_context_len = std::max(ab.max_context_len, ab.max_blocks_per_seq * cache.shape.block_size);
  }
  const size_t ws = paged_attention_workspace_bytes(tokens, cfg.n_heads, cfg.head_dim, ab.max_context_len);
  CONVEYOR_CHECK(ws <= attention_workspace_.bytes(), "cuda attention: the split-K workspace of ",
                 attention_workspace_.bytes(), " bytes is smaller than the ", ws, " this launch needs (head_dim ",
                 cfg.head_dim, ")");
  // Graphs always get the buffer (their launches must suit any later step of the layout).
  void* workspace = fixed_ || ws > 0 ? attention_workspace_.data() : nullptr;
  paged_attention_cuda(out.data, q.data, cache.k, cache.v, ab, cache.shape, ap, workspace, dt_, stream_,
                       kv_format(cache));
}

}  // namespace

size_t cuda_ops_workspace_bytes(const CudaOpsSizes& sizes) {
  return gemm_workspace_bytes(sizes.metadata.max_tokens, sizes.max_accumulate_cols) + attention_workspace_bytes() +
         StepMetadata::device_bytes(sizes.metadata);
}

size_t cuda_ops_device_bytes(const CudaOpsSizes& sizes) {
  return cuda_ops_workspace_bytes(sizes) + sizes.activation_pool_bytes + sizes.graph_pool_bytes;
}

std::unique_ptr<Ops> make_cuda_ops(int device, DType dt, const CudaOpsSizes& sizes) {
  return std::make_unique<CudaOps>(device, dt, sizes);
}

void cuda_memory_info(int device, size_t* total, size_t* free) {
  CONVEYOR_CUDA_CHECK(cudaSetDevice(device));
  CONVEYOR_CUDA_CHECK(cudaMemGetInfo(free, total));
}

}  // namespace conveyor
