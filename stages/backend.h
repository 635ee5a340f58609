// The compute backend the model code runs on: tensor views, backend-owned tensors, and the ops of a
// Llama-family decoder (`Ops`). The CPU implementation (cpu_ops.h) calls kernels/cpu; a CUDA one
// implements the same interface over device memory. Model code (attention, MLP, layers, stage) sees
// only this header, so it never knows where its tensors live. Per-step metadata (token ids,
// positions, block tables) is handed over once per step by set_batch and read by the ops that need it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/dtype.h"
#include "runtime/model/host_tensor.h"
#include "stages/kv_cache.h"

namespace conveyor {

// A 2-D row-major view [rows, cols] (contiguous) of backend memory. Activations and weights are
// fp32 on the CPU backend; dtype lets a GPU backend hold bf16/f16 behind the same views.
struct TensorView {
  void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kF32;
  // An FP8 linear weight: data holds e4m3 codes (kU8 on a GPU; on the CPU their exact fp32 values,
  // which its blocked fp32 matmul reads), scales one fp32 scale per row in the same memory, and
  // input_scale the static activation scale (0: activations are quantized per token).
  const float* scales = nullptr;
  float input_scale = 0.f;
  bool fp8() const { return scales != nullptr; }
  int64_t numel() const { return rows * cols; }
  float* f32() const { return static_cast<float*>(data); }
  // Rows [first, first + count) of this (contiguous) view.
  TensorView row_slice(int64_t first, int64_t count) const {
    return TensorView{static_cast<char*>(data) + first * cols * static_cast<int64_t>(dtype_size(dtype)), count, cols,
                      dtype, scales ? scales + first : nullptr, input_scale};
  }
};

// An FP8 linear weight on the host, as WeightBank hands it to a backend: e4m3 codes in the HF
// [out, in] layout, one fp32 scale per output row (a per-tensor scale repeated), the static
// activation scale or 0 for dynamic per-token activations.
struct Fp8HostWeight {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> codes;  // [rows, cols]
  std::vector<float> scales;   // [rows]
  float input_scale = 0.f;
};

// A tensor owned by the backend (host or device memory); cheap to move, freed with its last copy.
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<void> storage, TensorView view) : storage_(std::move(storage)), view_(view) {}
  const TensorView& view() const { return view_; }
  int64_t rows() const { return view_.rows; }
  int64_t cols() const { return view_.cols; }
  bool empty() const { return view_.data == nullptr; }
  // The first n rows, sharing (and keeping alive) this tensor's storage.
  Tensor first_rows(int64_t n) const { return Tensor(storage_, view_.row_slice(0, n)); }

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

// Rotary embedding settings, spelled out here (not ModelSpec's) so backends need no model header.
enum class RopeKind { kDefault, kLinear, kLlama3, kDynamic };
struct RopeParams {
  int head_dim = 0;
  double theta = 10000.0;
  RopeKind kind = RopeKind::kDefault;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 0;  // llama3
  int max_position_embeddings = 0;           // dynamic NTK rescales past it
};

// One step's tokens as the host describes them; set_batch copies what the backend needs.
// Both backends keep one RopeTable and rebuild it only when the parameters change.
bool same_rope(const RopeParams& a, const RopeParams& b);
std::unique_ptr<RopeTable> make_rope_table(const RopeParams& p);

struct BatchInfo {
  std::vector<int32_t> token_ids;     // [tokens]; empty on stages without the embedding
  std::vector<int32_t> positions;     // [tokens]
  std::vector<int32_t> query_start;   // [num_seqs + 1]
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks], padded with -1
  int max_blocks = 0;
  // Per sequence: the seq_len dynamic NTK rope sees, i.e. the sequence's last new position + 1.
  std::vector<int32_t> rope_seq_len;
  std::vector<int32_t> logit_rows;    // rows (tokens) whose hidden state becomes logits, in plan order
  int num_seqs() const { return static_cast<int>(query_start.size()) - 1; }
  int num_tokens() const { return static_cast<int>(positions.size()); }
};

// Throws unless the batch's arrays agree with each other: query_start ends at the token count, token
// ids are absent or one per token, and rope_seq_len and block_tables have one entry (row) per
// sequence. Every backend's set_batch calls it first; `backend` ("cpu", "cuda") opens the message.
void validate_batch(const BatchInfo& b, const char* backend);

// One layer's K and V pools, shaped as kernels/cpu/attention.h describes, in the backend's memory
// (host f32 on the CPU, the activation dtype on a GPU), or FP8: e4m3 codes (kU8) read as code * scale.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  PagedKvShape shape;
  DType dtype = DType::kF32;
  KvScales scales;  // FP8 only
  // FP8 only: when set, the attention first takes the scales from this step's K and V
  // (kv_scales_from_amax), stores them here and uses them (cache.calculate_kv_scales).
  KvScales* calibrate = nullptr;
  bool fp8() const { return dtype == DType::kU8; }
};

// A pre-norm's weight [1, hidden] and epsilon, for the ops that fuse the norm into what reads it.
struct NormView {
  TensorView weight;
  float eps = 0.f;
};

struct AttentionConfig {
  int n_heads = 0;         // this rank's query heads
  int n_kv_heads = 0;      // this rank's KV heads
  int head_dim = 0;
  float scale = 0.f;       // 1/sqrt(head_dim)
  int sliding_window = 0;  // 0: none
};

// A recorded sequence of ops (a CUDA graph), replayed as one launch on the backend's stream; it reads
// the metadata of the last set_batch_fixed of the same layout and writes the tensors it was captured with.
class OpsGraph {
 public:
  virtual ~OpsGraph() = default;
  virtual void replay() = 0;
};

class Ops {
 public:
  virtual ~Ops() = default;

  // The activation (and weight) dtype: kF32 on the CPU, kBF16/kF16 on a GPU. Logits are always kF32.
  virtual DType dtype() const { return DType::kF32; }
  // The stream every op and every data-plane communicator call of this backend is ordered on
  // (a cudaStream_t on CUDA; nullptr on the host, which MPI ignores).
  virtual void* stream() const { return nullptr; }
  // Transfers between stages run on their own stream, so micro-batch m travels while m+1 computes (on
  // the host: the ops' stream, nullptr). order_after makes work enqueued later on `waiter` wait for
  // everything enqueued so far on `signaller`; a no-op on the host, where every call is synchronous.
  virtual void* comm_stream() const { return stream(); }
  virtual void order_after(void* waiter, void* signaller) { (void)waiter; (void)signaller; }
  // Device timestamps for the trace: mark(stream) records a point on the stream and returns its id;
  // mark_seconds(id) waits for it and gives its time since the last restart_marks(). -1 on the host,
  // which has no device clock (its spans are the host's).
  virtual int64_t mark(void* stream) { (void)stream; return -1; }
  virtual double mark_seconds(int64_t id) { (void)id; return -1; }
  virtual void restart_marks() {}
  // Starts (stops) a device profiler's collection, e.g. cudaProfilerStart for ncu; no-op on the host.
  virtual void set_profiling(bool on) { (void)on; }

  // Memory. adopt takes a loaded weight (the CPU backend keeps its buffer; a GPU one uploads it,
  // converted to dtype()) as [rows, cols] where cols is the last dimension (1-D weights are [1, n]).
  virtual Tensor empty(int64_t rows, int64_t cols, DType dt) = 0;
  Tensor empty(int64_t rows, int64_t cols) { return empty(rows, cols, dtype()); }
  virtual Tensor adopt(HostTensor&& weight) = 0;
  // Takes an FP8 linear weight (codes and scales); linear / linear_add then run FP8 GEMMs with it,
  // quantizing x per token (or with the static input_scale). Backends without FP8 throw.
  virtual Tensor adopt_fp8(Fp8HostWeight&& weight);
  // Every weight of the stage has been adopted: host buffers kept from one adopt to the next may go.
  virtual void end_of_load() {}
  // upload converts host fp32 to dtype(); download converts any float tensor to fp32 and waits.
  virtual Tensor upload(const float* host, int64_t rows, int64_t cols) = 0;
  virtual void download(const TensorView& t, float* host) = 0;  // host holds t.numel() floats
  // dst[:, dst_col + j] = src[:, src_col + j] for j < cols; same rows and dtype (LM-head shards).
  virtual void copy_cols(const TensorView& dst, int64_t dst_col, const TensorView& src, int64_t src_col,
                         int64_t cols) = 0;
  // The KV pools of a stage's layers in this backend's memory, zero-filled: in dtype() (the CPU: f32),
  // or with fp8 as e4m3 codes (scales 1.0 until KvCache::set_scales).
  virtual std::unique_ptr<KvCache> make_kv_cache(int first_layer, int num_layers, const PagedKvShape& shape,
                                                 bool fp8) {
    return std::make_unique<KvCache>(first_layer, num_layers, shape, fp8 ? DType::kU8 : DType::kF32);
  }
  std::unique_ptr<KvCache> make_kv_cache(int first_layer, int num_layers, const PagedKvShape& shape) {
    return make_kv_cache(first_layer, num_layers, shape, false);
  }

  // The step's metadata; every op below that reads ids, positions or block tables uses the last one.
  virtual void set_batch(const BatchInfo& batch) = 0;
  const BatchInfo& batch() const { return batch_; }

  // Graphs (decode steps). set_batch_fixed is set_batch with the metadata at device addresses fixed
  // per layout (the sizes of the batch's arrays; block tables at stride batch.max_blocks), so a graph
  // captured after it replays with any later step's values of that layout. graph_safe: whether every
  // launch of a step over `batch` depends only on what set_batch_fixed puts in device memory.
  virtual bool supports_graphs() const { return false; }
  // Whether a GEMM shape's first use times candidate algorithms (GemmRunner): a start-up warm-up
  // (StageModel::warm_up_gemms) then moves that cost out of the run.
  virtual bool tunes_on_first_use() const { return false; }
  // One line per GEMM shape the backend has planned, saying how it chose (GemmRunner::describe and the
  // FP8 runner's); empty where nothing is tuned. For logs and tests.
  virtual std::string describe_gemms() const { return ""; }
  virtual bool graph_safe(const BatchInfo& batch) const { (void)batch; return false; }
  virtual void set_batch_fixed(const BatchInfo& batch) { set_batch(batch); }
  // Records the ops `body` enqueues (not run now). Tensors allocated inside come from memory private
  // to graphs, so eager work never reuses what a replay writes.
  virtual std::unique_ptr<OpsGraph> capture(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }

  // out[t] = table[ids[t] - vocab_start] for ids inside the shard, zeros elsewhere.
  virtual void embedding(const TensorView& out, const TensorView& table, int vocab_size, int vocab_start) = 0;
  virtual void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) = 0;
  // out = x W^T (+ bias); w is [out_features, in_features], bias [1, out_features] or empty. out may
  // be kF32 while x and w are dtype() (the LM head's logits). An FP8 w (w.fp8()) quantizes x first.
  virtual void linear(const TensorView& out, const TensorView& x, const TensorView& w, const TensorView& bias) = 0;
  // out += x W^T, out in dtype() (a projection added into the residual stream). The default is linear
  // into a temporary, then add; a GPU accumulates in the GEMM (one rounding, no extra pass).
  virtual void linear_add(const TensorView& out, const TensorView& x, const TensorView& w);
  // out = rms_norm(x) W^T (+ bias), the normed rows feeding only this linear. The default runs rms_norm
  // into a temporary, then linear; a GPU with an FP8 w quantizes the normed rows in the norm's kernel
  // (the same codes, no bf16 rows written and read back).
  virtual void rms_norm_linear(const TensorView& out, const TensorView& x, const NormView& norm, const TensorView& w,
                               const TensorView& bias);
  // out = silu_mul(gate_up) W^T, or out += it when accumulate (as linear_add); the default runs silu_mul
  // into a temporary, then linear / linear_add; a GPU with an FP8 w quantizes in silu_mul's kernel.
  virtual void silu_mul_linear(const TensorView& out, const TensorView& gate_up, const TensorView& w,
                               bool accumulate);
  // Rotates q [tokens, n_heads * head_dim] and k [tokens, n_kv_heads * head_dim] in place.
  virtual void rope(const TensorView& q, const TensorView& k, int n_heads, int n_kv_heads, const RopeParams& p) = 0;
  // Writes k, v into the cache, then out = attention of q over each sequence's cached positions.
  virtual void attention(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                         const KvLayerView& cache, const AttentionConfig& cfg) = 0;
  // Attention from one fused projection: qkv [tokens, (n_heads + 2 n_kv_heads) * head_dim] holds
  // q | k | v per token. The default splits it, rotates q and k and calls attention(); a GPU does the
  // split, rope and KV-cache write in one kernel.
  virtual void qkv_attention(const TensorView& out, const TensorView& qkv, const KvLayerView& cache,
                             const AttentionConfig& cfg, const RopeParams& rope_params);
  // out [tokens, inter] = silu(gate) * up of gate_up [tokens, 2 * inter] (gate | up).
  virtual void silu_mul(const TensorView& out, const TensorView& gate_up) = 0;
  virtual void add(const TensorView& out, const TensorView& a, const TensorView& b) = 0;  // may alias
  // max |x[r, c]| over every row r and c in [col, col + cols), on the host (waits for the device). Not
  // in a graph capture. The default downloads x.
  virtual float abs_max_cols(const TensorView& x, int64_t col, int64_t cols);
  // out[i] = x[batch().logit_rows[i]].
  virtual void gather_logit_rows(const TensorView& out, const TensorView& x) = 0;

 protected:
  BatchInfo batch_;
};

}  // namespace conveyor
