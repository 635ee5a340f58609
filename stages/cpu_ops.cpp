// CPU implementation of Ops (see backend.h). Shapes are checked here, once per op, so a wiring
// mistake in model code is an Error naming the op rather than a silent out-of-bounds read.
#include "stages/cpu_ops.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/cpu/add.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

void check_f32(const TensorView& t, const char* op, const char* what) {
  CONVEYOR_CHECK(t.dtype == DType::kF32 && t.data != nullptr, "cpu ", op, ": ", what,
                 " must be a non-empty f32 tensor (got ", dtype_name(t.dtype), ")");
}

void check_shape(const TensorView& t, int64_t rows, int64_t cols, const char* op, const char* what) {
  check_f32(t, op, what);
  CONVEYOR_CHECK(t.rows == rows && t.cols == cols, "cpu ", op, ": ", what, " is [", t.rows, ", ", t.cols,
                 "], expected [", rows, ", ", cols, "]");
}

class CpuOps final : public Ops {
 public:
  using Ops::empty;
  Tensor empty(int64_t rows, int64_t cols, DType dt) override {
    CONVEYOR_CHECK(dt == DType::kF32, "cpu empty: the CPU backend holds f32 tensors only, not ", dtype_name(dt));
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * cols));
    return Tensor(buf, TensorView{buf->data(), rows, cols, DType::kF32});
  }

  Tensor adopt(HostTensor&& w) override {
    CONVEYOR_CHECK(!w.shape.empty() && w.shape.size() <= 2, "cpu adopt: weight '", w.name, "' has ",
                   w.shape.size(), " dimensions, expected 1 or 2");
    int64_t cols = w.shape.back();
    int64_t rows = w.shape.size() == 2 ? w.shape[0] : 1;
    auto buf = std::make_shared<std::vector<float>>(std::move(w.data));
    CONVEYOR_CHECK(static_cast<int64_t>(buf->size()) == rows * cols, "cpu adopt: weight '", w.name, "' holds ",
                   buf->size(), " values for shape [", rows, ", ", cols, "]");
    return Tensor(buf, TensorView{buf->data(), rows, cols, DType::kF32});
  }

  // Codes are kept as their exact fp32 values so the FP8 GEMM runs through the blocked fp32 matmul.
  Tensor adopt_fp8(Fp8HostWeight&& w) override {
    CONVEYOR_CHECK(static_cast<int64_t>(w.codes.size()) == w.rows * w.cols &&
                       static_cast<int64_t>(w.scales.size()) == w.rows,
                   "cpu adopt_fp8: weight '", w.name, "' holds ", w.codes.size(), " codes and ", w.scales.size(),
                   " scales for [", w.rows, ", ", w.cols, "]");
    struct Storage {
      std::vector<float> values;
      std::vector<float> scales;
    };
    auto buf = std::make_shared<Storage>();
    buf->values.resize(w.codes.size());
    dequantize_rows_fp8_ref(buf->values.data(), w.codes.data(), nullptr, w.rows, w.cols);
    buf->scales = std::move(w.scales);
    return Tensor(buf, TensorView{buf->values.data(), w.rows, w.cols, DType::kF32, buf->scales.data(), w.input_scale});
  }

  Tensor upload(const float* host, int64_t rows, int64_t cols) override {
    Tensor t = empty(rows, cols);
    std::memcpy(t.view().data, host, static_cast<size_t>(rows * cols) * sizeof(float));
    return t;
  }

  void download(const TensorView& t, float* host) override {
    check_f32(t, "download", "tensor");
    std::memcpy(host, t.data, static_cast<size_t>(t.numel()) * sizeof(float));
  }

  void copy_cols(const TensorView& dst, int64_t dst_col, const TensorView& src, int64_t src_col,
                 int64_t cols) override {
    check_f32(dst, "copy_cols", "dst");
    check_f32(src, "copy_cols", "src");
    CONVEYOR_CHECK(dst.rows == src.rows && cols >= 0 && dst_col >= 0 && src_col >= 0 && dst_col + cols <= dst.cols &&
                       src_col + cols <= src.cols,
                   "cpu copy_cols: columns [", src_col, ", +", cols, ") of [", src.rows, ", ", src.cols, "] into [",
                   dst_col, ", +", cols, ") of [", dst.rows, ", ", dst.cols, "] do not fit");
    for (int64_t r = 0; r < dst.rows; ++r)
      std::memcpy(dst.f32() + r * dst.cols + dst_col, src.f32() + r * src.cols + src_col,
                  static_cast<size_t>(cols) * sizeof(float));
  }

  void set_batch(const BatchInfo& b) override {
    validate_batch(b, "cpu");
    batch_ = b;
  }

  void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) override {
    CONVEYOR_CHECK(static_cast<int>(batch_.token_ids.size()) == batch_.num_tokens(),
                   "cpu embedding: the batch carries no token ids");
    check_shape(out, batch_.num_tokens(), table.cols, "embedding", "out");
    check_f32(table, "embedding", "table");
    embedding_ref(out.f32(), batch_.token_ids.data(), table.f32(), static_cast<int>(out.rows),
                  static_cast<int>(out.cols), vocab_size, vocab_start, vocab_start + static_cast<int>(table.rows));
  }

  void rms_norm(const TensorView& out, const TensorView& x, const TensorView& w, float eps) override {
    check_shape(out, x.rows, x.cols, "rms_norm", "out");
    check_shape(w, 1, x.cols, "rms_norm", "weight");
    rms_norm_ref(out.f32(), x.f32(), w.f32(), static_cast<int>(x.rows), static_cast<int>(x.cols), eps);
  }

  void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) override {
    check_shape(w, out.cols, x.cols, "linear", "weight");
    check_shape(out, x.rows, w.rows, "linear", "out");
    if (bias.data) check_shape(bias, 1, w.rows, "linear", "bias");
    if (w.fp8()) {
      linear_fp8_ref(out.f32(), x.f32(), w.f32(), w.scales, w.input_scale, bias.data ? bias.f32() : nullptr,
                     static_cast<int>(x.rows), static_cast<int>(w.rows), static_cast<int>(x.cols));
      return;
    }
    matmul_ref(out.f32(), x.f32(), w.f32(), bias.data ? bias.f32() : nullptr, static_cast<int>(x.rows),
               static_cast<int>(w.rows), static_cast<int>(x.cols));
  }

  void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) override {
    const int tokens = batch_.num_tokens();
    check_shape(q, tokens, static_cast<int64_t>(n_heads) * p.head_dim, "rope", "q");
    check_shape(k, tokens, static_cast<int64_t>(n_kv_heads) * p.head_dim, "rope", "k");
    const RopeTable& table = rope_table(p);
    if (!table.is_dynamic()) {
      rope_ref(q.f32(), k.f32(), batch_.positions.data(), tokens, n_heads, n_kv_heads, table);
      return;
    }
    // Dynamic NTK: each sequence rotates with its own seq_len (see BatchInfo::rope_seq_len).
    for (int s = 0; s < batch_.num_seqs(); ++s) {
      const int begin = batch_.query_start[s];
      const int n = batch_.query_start[s + 1] - begin;
      if (n == 0) continue;
      rope_ref(q.f32() + static_cast<size_t>(begin) * q.cols, k.f32() + static_cast<size_t>(begin) * k.cols,
               batch_.positions.data() + begin, n, n_heads, n_kv_heads, table, batch_.rope_seq_len[s]);
    }
  }

  void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvLayerView& cache, const AttentionConfig& cfg) override {
    const int tokens = batch_.num_tokens();
    check_shape(q, tokens, static_cast<int64_t>(cfg.n_heads) * cfg.head_dim, "attention", "q");
    check_shape(out, tokens, q.cols, "attention", "out");
    check_shape(k, tokens, static_cast<int64_t>(cfg.n_kv_heads) * cfg.head_dim, "attention", "k");
    check_shape(v, tokens, k.cols, "attention", "v");
    CONVEYOR_CHECK((cache.dtype == DType::kF32 || cache.fp8()) && cache.k && cache.v,
                   "cpu attention: the KV cache must be host f32 or FP8, not ", dtype_name(cache.dtype));
    CONVEYOR_CHECK(cache.shape.n_kv_heads == cfg.n_kv_heads && cache.shape.head_dim == cfg.head_dim,
                   "cpu attention: the KV cache holds ", cache.shape.n_kv_heads, " heads of ", cache.shape.head_dim,
                   ", the layer has ", cfg.n_kv_heads, " of ", cfg.head_dim);
    AttentionBatch ab;
    ab.num_seqs = batch_.num_seqs();
    ab.query_start = batch_.query_start.data();
    ab.positions = batch_.positions.data();
    ab.block_tables = batch_.block_tables.data();
    ab.max_blocks_per_seq = batch_.max_blocks;
    AttentionParams ap;
    ap.n_heads = cfg.n_heads;
    ap.scale = cfg.scale;
    ap.sliding_window = cfg.sliding_window;
    if (cache.fp8()) {
      attention_fp8_ref(out.f32(), q.f32(), k.f32(), v.f32(), static_cast<uint8_t*>(cache.k),
                        static_cast<uint8_t*>(cache.v), ab, cache.shape, ap, cache.scales);
      return;
    }
    attention_ref(out.f32(), q.f32(), k.f32(), v.f32(), static_cast<float*>(cache.k), static_cast<float*>(cache.v), ab,
                  cache.shape, ap);
  }

  void silu_mul(const TensorView& out, const TensorView& gate_up) override {
    check_shape(out, gate_up.rows, gate_up.cols / 2, "silu_mul", "out");
    CONVEYOR_CHECK(gate_up.cols % 2 == 0, "cpu silu_mul: gate_up has an odd width ", gate_up.cols);
    silu_mul_ref(out.f32(), gate_up.f32(), static_cast<int>(gate_up.rows), static_cast<int>(out.cols));
  }

  void add(const TensorView& out, const TensorView& a, const TensorView& b) override {
    check_shape(a, out.rows, out.cols, "add", "a");
    check_shape(b, out.rows, out.cols, "add", "b");
    add_ref(out.f32(), a.f32(), b.f32(), out.numel());
  }

  void gather_logit_rows(const TensorView& out, const TensorView& x) override {
    check_shape(out, static_cast<int64_t>(batch_.logit_rows.size()), x.cols, "gather_logit_rows", "out");
    check_f32(x, "gather_logit_rows", "x");
    for (size_t i = 0; i < batch_.logit_rows.size(); ++i) {
      const int32_t r = batch_.logit_rows[i];
      CONVEYOR_CHECK(r >= 0 && r < x.rows, "cpu gather_logit_rows: row ", r, " outside [0, ", x.rows, ")");
      std::memcpy(out.f32() + i * out.cols, x.f32() + static_cast<size_t>(r) * x.cols, x.cols * sizeof(float));
    }
  }

 private:
  const RopeTable& rope_table(const RopeParams& p) {
    if (!rope_ || !same_rope(p, rope_params_)) {
      rope_ = make_rope_table(p);
      rope_params_ = p;
    }
    return *rope_;
  }

  std::unique_ptr<RopeTable> rope_;
  RopeParams rope_params_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() { return std::make_unique<CpuOps>(); }

}  // namespace conveyor
