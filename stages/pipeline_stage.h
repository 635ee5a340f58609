// PipelineStage: one rank's part of a pipeline-parallel, tensor-parallel model. The leader of a replica
// (stage 0, tp 0) submits StepPlans; every rank runs its StageModel on each plan in order:
//   stage 0:    plan from the leader (broadcast over the TP group) -> embedding + layers -> send down
//   stage s>0:  plan + hidden states from stage s-1 (same tp rank) -> layers -> send down
//   last stage: -> final norm, LM head -> tp 0 samples (StageSampler) -> StepResult to the leader
// Plans travel on MPI control communicators; hidden states on the data communicators (MPI on the CPU
// backend; NCCL or host-staged MPI on the CUDA backend, in device memory, on the ops' communication
// stream, ordered against compute by events, so micro-batch m travels while m+1 computes). The header
// of micro-batch m+1 is received while m computes and sends are non-blocking, so up to
// `micro_batches` plans are in the pipe at once. A shutdown plan flows down the same path and ends
// serve() on every rank. Every rank records its spans in a StageTimeline (on a GPU also the device
// time of its compute and transfers).
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/dist/device.h"
#include "runtime/dist/watchdog.h"
#include "runtime/engine/model_runner.h"
#include "stages/backend.h"
#include "stages/kv_cache.h"
#include "stages/pipeline_trace.h"
#include "stages/plan_sampler.h"
#include "stages/stage_model.h"
#include "stages/stage_options.h"

namespace conveyor {

class WorldConfig;
struct ProcessGroups;

// The communicators a stage uses; each is null when its group has one rank.
struct StageLinks {
  Communicator* tensor = nullptr;        // TP collectives of the layers (data plane)
  Communicator* tensor_ctl = nullptr;    // MPI: plan broadcast inside stage 0
  Communicator* pipeline = nullptr;      // hidden states between stages (data plane)
  Communicator* pipeline_ctl = nullptr;  // MPI: plans down, results back to the leader
};

class PipelineStage {
 public:
  // sampler: used on the last stage's tp rank 0 only (nullptr there: the CPU sampler over host logits).
  // kv_fp8: the KV cache holds e4m3 codes with the checkpoint's per-tensor scales (else 1.0).
  PipelineStage(const ModelSpec& spec, const WeightShare& share, WeightSet&& weights, std::unique_ptr<Ops> ops,
                const PagedKvShape& kv_shape, bool kv_fp8, int stage, int num_stages, StageLinks links,
                std::unique_ptr<StageSampler> sampler = nullptr);
  ~PipelineStage();

  bool is_leader() const { return stage_ == 0 && tp_rank_ == 0; }
  const ModelSpec& spec() const { return spec_; }
  int num_kv_blocks() const { return cache_->shape().num_blocks; }
  int block_size() const { return cache_->shape().block_size; }
  // The start-up line on this stage's KV cache and its scales (describe_kv_cache; "" for a plain one).
  std::string kv_cache_line() const { return model_->kv_cache_line(); }
  // cache.calculate_kv_scales: the first step's K and V give the FP8 cache's scales (StageModel); the
  // leader logs them after that step.
  void calculate_kv_scales() { model_->calculate_kv_scales(); }
  int num_stages() const { return num_stages_; }
  int stage() const { return stage_; }
  // The spans so far; device spans are read (waiting for the device) on each call.
  const StageTimeline& timeline();
  // runtime.cuda_graphs: decode steps as CUDA graphs (StageModel::set_graphs).
  void set_cuda_graphs(bool on) { model_->set_graphs(on); }
  // runtime.gemm_warmup: StageModel::warm_up_gemms (its timing waits for the GPU; the last GEMMs may
  // still run); the GEMM calls made.
  int64_t warm_up_gemms(int64_t max_tokens, int64_t max_logit_rows);
  // What each GEMM shape runs, as timed (Ops::describe_gemms; empty on the CPU backend).
  std::string describe_gemms() const { return ops_->describe_gemms(); }
  // runtime.profile_step: the step whose kernels a profiler started with collection off records.
  void set_profile_step(int64_t step) { profile_step_ = step; }
  // Micro-batches whose sends may be in flight before this stage waits for the oldest (>= 1).
  void set_max_outgoing(size_t n) { max_outgoing_ = n < 1 ? 1 : n; }
  // Arms the watchdog's deadline around every wait for a peer (not owned; may be null).
  void set_watchdog(Watchdog* watchdog) { watchdog_ = watchdog; }
  // Call on every rank right after a barrier: the spans' common origin.
  void start_clock();
  // `conveyor bench --step-timeline`: from now on each run() stamps its phases (apply, forward and the
  // model's metadata, sample) and their device spans ("gpu forward", "gpu sample") on the trace clock.
  void enable_step_stamps();
  // The stamps so far, device spans read (waiting for the device); null unless enabled.
  StepStamps* step_stamps();

  // Non-leader ranks: run plans until the shutdown plan arrives.
  void serve();
  // Leader only.
  void submit(const StepPlan& plan);
  StepResult wait();
  void shutdown();

 private:
  struct Outgoing {
    int64_t step = 0;  // the micro-batch
    std::array<int64_t, 2> header{};
    std::vector<int64_t> words;
    Tensor hidden;
    std::vector<std::unique_ptr<CommRequest>> requests;
    bool done();  // every request complete (tests, does not wait)
  };
  void run(const StepPlan& plan, const std::vector<int64_t>& words, const Tensor& input);
  StepResult sample_and_score(const StepPlan& plan, const Tensor& logits);
  void send_down(int64_t step, std::vector<int64_t> words, const Tensor& hidden);
  void send_result(const StepResult& result);
  // Drops the outgoing micro-batches at the front whose sends are complete.
  void drop_sent();
  // drop_sent, then waits for the oldest while more than `keep` are left. flush_sends: all of them.
  void settle_sends(size_t keep);
  void flush_sends();
  StepPlan receive_from_leader(std::vector<int64_t>* words);
  StepPlan receive_from_previous(std::vector<int64_t>* words, Tensor* hidden);
  void post_header_receive();
  bool is_last() const { return stage_ == num_stages_ - 1; }
  // A span between two device marks (Ops::mark), read into the timeline by timeline().
  struct DeviceSpan {
    int64_t step;
    Phase phase;
    int64_t begin, end, tokens;
  };
  void add_device_span(int64_t step, Phase phase, int64_t begin, int64_t end, int64_t tokens);
  // The hidden states go down on the communication stream as a copy: the next micro-batch may
  // overwrite the original (a graph's output buffer) before the transfer has read it.
  Tensor payload_for(const Tensor& hidden);

  ModelSpec spec_;
  int stage_, num_stages_, tp_rank_;
  StageLinks links_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<StageSampler> sampler_;
  std::vector<float> score_rows_;         // scored prompt rows on the host, reused across steps
  std::deque<StepResult> local_results_;  // pp = 1: the leader samples itself
  std::deque<std::unique_ptr<Outgoing>> outgoing_;
  // Micro-batches whose sends to the next stage may be in flight at once (the last stage's results are
  // bounded by the micro-batches in flight; send_result): 1 on GPUs (a send is ordered on the
  // communication stream, the host does not wait; the payload copy is freed in stream order), more on
  // the CPU backend, where MPI's shared-memory transport completes a send only once the receiver has
  // taken it (stages/cpu_transport.h): a stage would otherwise wait for a busy successor.
  size_t max_outgoing_ = 1;
  std::array<int64_t, 2> next_header_{};
  std::unique_ptr<CommRequest> next_header_request_;
  bool shut_down_ = false;
  int64_t last_step_ = -1;
  int64_t profile_step_ = -1;  // the last micro-batch this rank ran, for watchdog messages
  Watchdog* watchdog_ = nullptr;
  StageTimeline timeline_;
  std::vector<DeviceSpan> device_spans_;
  // Step stamps (enable_step_stamps): the host spans go straight in, device spans as marks until read.
  struct DeviceStamp {
    int64_t step;
    const char* phase;
    int64_t begin, end;
  };
  std::unique_ptr<StepStamps> stamps_;
  bool kv_scales_reported_ = false;
  std::vector<DeviceStamp> device_stamps_;
};

// The leader's view of its replica's pipeline, for the Engine: up to micro_batches plans in flight.
class PipelineRunner final : public ModelRunner {
 public:
  PipelineRunner(PipelineStage& stage, int micro_batches) : stage_(stage), micro_batches_(micro_batches) {}
  const ModelSpec& spec() const override { return stage_.spec(); }
  int num_kv_blocks() const override { return stage_.num_kv_blocks(); }
  int block_size() const override { return stage_.block_size(); }
  int max_in_flight() const override { return micro_batches_; }
  void submit(const StepPlan& plan) override { stage_.submit(plan); }
  StepResult wait() override { return stage_.wait(); }
  void shutdown() override { stage_.shutdown(); }

 private:
  PipelineStage& stage_;
  int micro_batches_;
};

// Everything one rank needs to take part: its share of the weights (open_share: loaded or dummy), its
// KV cache (the block count agreed as the minimum over all ranks), the control communicators. Its
// layers come from plan_layout (stages/layout_plan.h), the split `conveyor plan` prints for the same
// options. Collective over MPI_COMM_WORLD. The returned stage keeps pointers into `groups`, which must
// have been made for the same backend. On kCuda, `device` is this rank's GPU ordinal (already
// current), the dtype comes from opt.dtype and the KV blocks from opt.gpu_memory_utilization (unless
// opt.num_blocks is set).
struct PipelineParts {
  std::vector<std::unique_ptr<Communicator>> control;  // owned MPI control communicators
  std::unique_ptr<PipelineStage> stage;
  int micro_batches = 1;
  std::vector<int64_t> partition;  // layers per stage, as this run split them
  // The step budget the leader's scheduler runs (scheduler.max_num_seqs / max_num_batched_tokens, or
  // what choose_batch made of auto keys), agreed over the world and said at start-up by rank 0.
  BatchBudget batch;
};
PipelineParts make_pipeline_stage(const StageOptions& opt, const ModelSpec& spec, const WorldConfig& world,
                                  ProcessGroups& groups, Backend backend = Backend::kCpu, int device = 0);

}  // namespace conveyor
