// PipelineStage (see pipeline_stage.h). Wire protocol on a pipeline edge, per plan: a 2-word header
// [plan words, hidden elements] on the control communicator, the plan words, then the hidden states on
// the data communicator (none for the shutdown plan). Results go from the last stage's tp 0 to the
// leader as [words] then the words. Inside stage 0 the leader broadcasts [words] then the words.
#include "stages/pipeline_stage.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/dist/mpi_communicator.h"
#include "runtime/dist/process_groups.h"
#include "runtime/dist/world_config.h"
#include "runtime/model/weight_loader.h"
#include "stages/architecture.h"
#include "stages/cpu_model_runner.h"
#include "stages/cpu_ops.h"
#include "stages/cpu_transport.h"
#include "stages/memory_table.h"
#include "stages/layout_plan.h"
#include "stages/partitioner.h"
#ifdef CONVEYOR_WITH_CUDA
#include "stages/cuda/cuda_stage_parts.h"
#endif

namespace conveyor {

namespace {

// Arms the watchdog (when there is one) while alive, around a wait for a peer (wait_politely,
// stages/cpu_transport.h, for one that may take long).
class WaitGuard {
 public:
  WaitGuard(Watchdog* wd, const char* op, const std::string& context) {
    if (wd) scope_.emplace(*wd, op, context);
  }

 private:
  std::optional<Watchdog::Scope> scope_;
};

// The CPU backend's pipeline messages go in eager-sized pieces (stages/cpu_transport.h): a stage's sends
// complete while it computes on, and a waiting stage takes a message when it wakes.
void use_eager_messages(const StageLinks& links) {
  for (Communicator* c : {links.pipeline, links.pipeline_ctl})
    if (auto* mpi = dynamic_cast<MpiCommunicator*>(c)) mpi->set_message_limit(kCpuMessageBytes);
}

// runtime.gemm_warmup at start-up (PipelineStage::warm_up_gemms); `say`: log what it took.
void warm_up_gemms(PipelineStage& stage, const BatchBudget& batch, bool say) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t calls = stage.warm_up_gemms(batch.max_num_batched_tokens, batch.max_num_seqs);
  if (calls > 0 && say)
    spdlog::info("GEMM warm-up: {} GEMM calls at up to {} rows timed each shape's algorithms in {:.2f} s "
                 "(runtime.gemm_warmup=false leaves that to the run's first steps)",
                 calls, batch.max_num_batched_tokens,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (calls > 0 && say) spdlog::debug("GEMM choices after the warm-up (logging.level=debug):\n{}", stage.describe_gemms());
}

}  // namespace

PipelineStage::PipelineStage(const ModelSpec& spec, const WeightShare& share, WeightSet&& weights,
                             std::unique_ptr<Ops> ops, const PagedKvShape& kv_shape, bool kv_fp8, int stage,
                             int num_stages, StageLinks links, std::unique_ptr<StageSampler> sampler)
    : spec_(spec), stage_(stage), num_stages_(num_stages), tp_rank_(share.tp_rank), links_(links), ops_(std::move(ops)),
      sampler_(std::move(sampler)) {
  CONVEYOR_CHECK(num_stages == 1 || (links.pipeline && links.pipeline_ctl), "stage ", stage, " of ", num_stages,
                 ": a pipeline needs its data and control communicators");
  CONVEYOR_CHECK(share.tp_size == 1 || (links.tensor && links.tensor_ctl), "stage ", stage,
                 ": tensor parallelism needs its communicators");
  cache_ = ops_->make_kv_cache(static_cast<int>(share.first_layer),
                               static_cast<int>(share.last_layer - share.first_layer), kv_shape, kv_fp8);
  if (is_last() && tp_rank_ == 0 && !sampler_) sampler_ = make_cpu_stage_sampler(spec_.vocab);
  model_ = std::make_unique<StageModel>(spec_, share, std::move(weights), *ops_, *cache_, links.tensor);
}

PipelineStage::~PipelineStage() = default;

int64_t PipelineStage::warm_up_gemms(int64_t max_tokens, int64_t max_logit_rows) {
  return model_->warm_up_gemms(max_tokens, max_logit_rows);
}

void PipelineStage::run(const StepPlan& plan, const std::vector<int64_t>& words, const Tensor& input) {
  const bool samples = is_last() && tp_rank_ == 0;
  last_step_ = plan.step;
  if (samples) {
    const StepStamps::Span span(stamps_.get(), plan.step, "apply");
    sampler_->apply(plan);
  }
  const bool profiled = plan.step == profile_step_;
  if (profiled) ops_->set_profiling(true);
  const double t0 = timeline_.now();
  Tensor logits;
  const int64_t m0 = ops_->mark(ops_->stream());
  Tensor hidden;
  {
    const StepStamps::Span span(stamps_.get(), plan.step, "forward");
    hidden = model_->run(plan, input, is_last() ? &logits : nullptr);
  }
  const int64_t m1 = ops_->mark(ops_->stream());
  add_device_span(plan.step, Phase::kGpuCompute, m0, m1, static_cast<int64_t>(plan.num_tokens()));
  if (!kv_scales_reported_ && model_->kv_scales_calculated()) {
    kv_scales_reported_ = true;
    if (stage_ == 0 && tp_rank_ == 0) spdlog::info("{}", describe_calculated_kv_scales(*cache_, plan.step));
  }
  StepResult result;
  if (samples) {
    const StepStamps::Span span(stamps_.get(), plan.step, "sample");
    result = sample_and_score(plan, logits);
  }
  if (stamps_) {
    // The device reaches the metadata mark once the upload is done and, when it was idle, once the host
    // has got that far: "gpu metadata" is that wait, "gpu forward" the kernels from there.
    const int64_t mm = model_->metadata_mark();
    device_stamps_.push_back(DeviceStamp{plan.step, "gpu metadata", m0, mm});
    device_stamps_.push_back(DeviceStamp{plan.step, "gpu forward", mm, m1});
    if (samples) device_stamps_.push_back(DeviceStamp{plan.step, "gpu sample", m1, ops_->mark(ops_->stream())});
  }
  if (profiled) ops_->set_profiling(false);
  timeline_.add(plan.step, Phase::kCompute, t0, timeline_.now(), static_cast<int64_t>(plan.num_tokens()));
  if (!is_last()) {
    send_down(plan.step, words, hidden);
  } else if (samples) {
    send_result(result);
  }
}

void PipelineStage::start_clock() {
  timeline_.restart();
  device_spans_.clear();
  if (stamps_) stamps_->restart(timeline_.origin());
  device_stamps_.clear();
  ops_->restart_marks();
}

void PipelineStage::enable_step_stamps() {
  if (!stamps_) {
    stamps_ = std::make_unique<StepStamps>();
    stamps_->restart(timeline_.origin());
  }
  model_->set_step_stamps(stamps_.get());
}

StepStamps* PipelineStage::step_stamps() {
  if (!stamps_) return nullptr;
  for (const DeviceStamp& d : device_stamps_) {
    if (d.begin < 0 || d.end < 0) continue;  // the host has no device clock
    const double b = ops_->mark_seconds(d.begin), e = ops_->mark_seconds(d.end);
    if (b >= 0 && e >= b) stamps_->add(d.step, d.phase, b, e, /*device=*/true);
  }
  device_stamps_.clear();
  return stamps_.get();
}

const StageTimeline& PipelineStage::timeline() {
  for (const DeviceSpan& d : device_spans_) {
    const double b = ops_->mark_seconds(d.begin), e = ops_->mark_seconds(d.end);
    if (b >= 0 && e >= b) timeline_.add(d.step, d.phase, b, e, d.tokens);
  }
  device_spans_.clear();
  return timeline_;
}

void PipelineStage::add_device_span(int64_t step, Phase phase, int64_t begin, int64_t end, int64_t tokens) {
  if (begin >= 0 && end >= 0) device_spans_.push_back(DeviceSpan{step, phase, begin, end, tokens});
}

Tensor PipelineStage::payload_for(const Tensor& hidden) {
  void* cs = ops_->comm_stream();
  if (cs == ops_->stream()) return hidden;
  Tensor copy = ops_->empty(hidden.rows(), hidden.cols(), hidden.view().dtype);
  ops_->copy_cols(copy.view(), 0, hidden.view(), 0, hidden.cols());
  ops_->order_after(cs, ops_->stream());
  return copy;
}

// The sampler reads the first rows as it always did; the scored prompt rows after them come to the
// host (a perplexity or prompt_logprobs step, never a decode graph) and are scored there.
StepResult PipelineStage::sample_and_score(const StepPlan& plan, const Tensor& logits) {
  const int64_t n_sampled = static_cast<int64_t>(plan.num_logits());
  const int64_t n_scored = static_cast<int64_t>(plan.num_score_rows());
  if (n_scored == 0) return sampler_->sample(plan, logits.view());
  const TensorView all = logits.view();
  StepResult result = sampler_->sample(plan, all.row_slice(0, n_sampled));
  score_rows_.resize(static_cast<size_t>(n_scored * spec_.vocab));
  ops_->download(all.row_slice(n_sampled, n_scored), score_rows_.data());
  result.scores = score_plan(plan, score_rows_.data(), spec_.vocab);
  return result;
}

bool PipelineStage::Outgoing::done() {
  for (auto& r : requests)
    if (!r->done()) return false;
  return true;
}

void PipelineStage::drop_sent() {
  while (!outgoing_.empty() && outgoing_.front()->done()) outgoing_.pop_front();
}

void PipelineStage::settle_sends(size_t keep) {
  drop_sent();
  while (outgoing_.size() > keep) {
    WaitGuard scope(watchdog_, "send", "micro-batch " + std::to_string(outgoing_.front()->step) + " to stage " +
                                           std::to_string(is_last() ? 0 : stage_ + 1));
    for (auto& r : outgoing_.front()->requests) r->wait();
    outgoing_.pop_front();
  }
}

void PipelineStage::flush_sends() { settle_sends(0); }

void PipelineStage::send_down(int64_t step, std::vector<int64_t> words, const Tensor& hidden) {
  const double t0 = timeline_.now();
  // At most max_outgoing_ micro-batches' sends in flight: waiting for the oldest is time this stage
  // spends sending.
  settle_sends(max_outgoing_ - 1);
  auto o = std::make_unique<Outgoing>();
  o->step = step;
  o->words = std::move(words);
  o->hidden = hidden;
  o->header = {static_cast<int64_t>(o->words.size()), hidden.empty() ? 0 : hidden.view().numel()};
  const int next = stage_ + 1;
  o->requests.push_back(links_.pipeline_ctl->isend(o->header.data(), 2, DType::kI64, next, nullptr));
  o->requests.push_back(links_.pipeline_ctl->isend(o->words.data(), o->words.size(), DType::kI64, next, nullptr));
  if (o->header[1] > 0) {
    o->hidden = payload_for(hidden);
    void* cs = ops_->comm_stream();
    const int64_t m0 = ops_->mark(cs);
    o->requests.push_back(links_.pipeline->isend(o->hidden.view().data, static_cast<size_t>(o->header[1]),
                                                 o->hidden.view().dtype, next, cs));
    add_device_span(step, Phase::kGpuTransfer, m0, ops_->mark(cs), hidden.rows());
  }
  outgoing_.push_back(std::move(o));
  timeline_.add(step, Phase::kSend, t0, timeline_.now(), hidden.empty() ? 0 : hidden.rows());
}

void PipelineStage::send_result(const StepResult& result) {
  if (num_stages_ == 1) {
    local_results_.push_back(result);
    return;
  }
  const double t0 = timeline_.now();
  // The leader submits micro-batch m + M only after it took result m, so at most M results are ever in
  // flight: dropping the sent ones bounds the queue, and waiting here would only stall this stage.
  drop_sent();
  auto o = std::make_unique<Outgoing>();
  o->step = result.step;
  o->words = result.encode();
  o->header = {static_cast<int64_t>(o->words.size()), 0};
  o->requests.push_back(links_.pipeline_ctl->isend(o->header.data(), 1, DType::kI64, 0, nullptr));
  o->requests.push_back(links_.pipeline_ctl->isend(o->words.data(), o->words.size(), DType::kI64, 0, nullptr));
  outgoing_.push_back(std::move(o));
  timeline_.add(result.step, Phase::kSend, t0, timeline_.now(), 0);
}

void PipelineStage::post_header_receive() {
  next_header_request_ = links_.pipeline_ctl->irecv(next_header_.data(), 2, DType::kI64, stage_ - 1, nullptr);
}

StepPlan PipelineStage::receive_from_previous(std::vector<int64_t>* words, Tensor* hidden) {
  const double t0 = timeline_.now();
  if (!next_header_request_) post_header_receive();
  {
    WaitGuard scope(watchdog_, "recv", "the micro-batch after " + std::to_string(last_step_) + " from stage " +
                                              std::to_string(stage_ - 1));
    wait_politely(*next_header_request_);
  }
  next_header_request_.reset();
  const std::array<int64_t, 2> header = next_header_;
  CONVEYOR_CHECK(header[0] > 0 && header[0] < (int64_t{1} << 34) && header[1] >= 0, "stage ", stage_,
                 ": malformed message header [", header[0], ", ", header[1], "] from stage ", stage_ - 1);
  words->assign(static_cast<size_t>(header[0]), 0);
  links_.pipeline_ctl->recv(words->data(), words->size(), DType::kI64, stage_ - 1, nullptr);
  StepPlan plan = StepPlan::decode(*words);
  const int64_t expected = plan.shutdown ? 0 : static_cast<int64_t>(plan.num_tokens()) * spec_.hidden;
  CONVEYOR_CHECK(header[1] == expected, "stage ", stage_, ": step ", plan.step, " brings ", header[1],
                 " hidden values from stage ", stage_ - 1, ", expected ", expected);
  WaitGuard scope(watchdog_, "recv", "the hidden states of micro-batch " + std::to_string(plan.step) +
                                            " from stage " + std::to_string(stage_ - 1));
  if (expected > 0) {
    *hidden = ops_->empty(static_cast<int64_t>(plan.num_tokens()), spec_.hidden);
    // The new tensor's memory may still be in use by kernels enqueued before; compute waits for the data.
    void* cs = ops_->comm_stream();
    ops_->order_after(cs, ops_->stream());
    const int64_t m0 = ops_->mark(cs);
    links_.pipeline->recv(hidden->view().data, static_cast<size_t>(expected), hidden->view().dtype, stage_ - 1, cs);
    add_device_span(plan.step, Phase::kGpuTransfer, m0, ops_->mark(cs), static_cast<int64_t>(plan.num_tokens()));
    ops_->order_after(ops_->stream(), cs);
  }
  // Overlap: the next micro-batch's header is already on its way while this one computes.
  if (!plan.shutdown) post_header_receive();
  timeline_.add(plan.step, Phase::kRecv, t0, timeline_.now(), static_cast<int64_t>(plan.num_tokens()));
  return plan;
}

StepPlan PipelineStage::receive_from_leader(std::vector<int64_t>* words) {
  const double t0 = timeline_.now();
  int64_t n = 0;
  WaitGuard scope(watchdog_, "broadcast", "the plan after micro-batch " + std::to_string(last_step_) +
                                                 " from the leader (stage 0, tp 0)");
  links_.tensor_ctl->broadcast(&n, 1, 0);
  CONVEYOR_CHECK(n > 0 && n < (int64_t{1} << 34), "stage 0 tp ", tp_rank_, ": malformed plan length ", n);
  words->assign(static_cast<size_t>(n), 0);
  links_.tensor_ctl->broadcast(words->data(), words->size(), 0);
  StepPlan plan = StepPlan::decode(*words);
  timeline_.add(plan.step, Phase::kRecv, t0, timeline_.now(), static_cast<int64_t>(plan.num_tokens()));
  return plan;
}

void PipelineStage::serve() {
  CONVEYOR_CHECK(!is_leader(), "internal: the leader submits plans, it does not serve");
  std::vector<int64_t> words;
  for (;;) {
    Tensor hidden;
    StepPlan plan = stage_ == 0 ? receive_from_leader(&words) : receive_from_previous(&words, &hidden);
    if (plan.shutdown) {
      if (!is_last()) send_down(plan.step, words, Tensor());
      break;
    }
    run(plan, words, hidden);
  }
  flush_sends();
}

void PipelineStage::submit(const StepPlan& plan) {
  CONVEYOR_CHECK(is_leader() && !shut_down_, "internal: submit on a rank that is not a live leader");
  std::vector<int64_t> words = plan.encode();
  if (links_.tensor_ctl) {
    int64_t n = static_cast<int64_t>(words.size());
    links_.tensor_ctl->broadcast(&n, 1, 0);
    links_.tensor_ctl->broadcast(words.data(), words.size(), 0);
  }
  run(plan, words, Tensor());
}

StepResult PipelineStage::wait() {
  CONVEYOR_CHECK(is_leader(), "internal: only the leader waits for results");
  if (num_stages_ == 1) {
    CONVEYOR_CHECK(!local_results_.empty(), "internal: wait() with no plan submitted");
    StepResult r = std::move(local_results_.front());
    local_results_.pop_front();
    return r;
  }
  const double t0 = timeline_.now();
  int64_t n = 0;
  const int last = num_stages_ - 1;
  WaitGuard scope(watchdog_, "recv", "the sampled tokens of the oldest micro-batch in flight from stage " +
                                            std::to_string(last) + " (the last)");
  wait_politely(*links_.pipeline_ctl->irecv(&n, 1, DType::kI64, last, nullptr));
  CONVEYOR_CHECK(n > 0 && n < (int64_t{1} << 30), "leader: malformed result length ", n, " from stage ", last);
  std::vector<int64_t> words(static_cast<size_t>(n));
  links_.pipeline_ctl->recv(words.data(), words.size(), DType::kI64, last, nullptr);
  StepResult r = StepResult::decode(words);
  timeline_.add(r.step, Phase::kWait, t0, timeline_.now(), 0);
  return r;
}

void PipelineStage::shutdown() {
  if (!is_leader() || shut_down_) return;
  shut_down_ = true;
  StepPlan plan;
  plan.step = -1;
  plan.shutdown = true;
  std::vector<int64_t> words = plan.encode();
  if (links_.tensor_ctl) {
    int64_t n = static_cast<int64_t>(words.size());
    links_.tensor_ctl->broadcast(&n, 1, 0);
    links_.tensor_ctl->broadcast(words.data(), words.size(), 0);
  }
  if (num_stages_ > 1) send_down(plan.step, words, Tensor());
  flush_sends();
}

// --- construction ---------------------------------------------------------------------------------

namespace {

// Every rank must address the same block ids: the minimum over the world.
int agreed_kv_blocks(long long blocks) {
  long long agreed = 0;
  CONVEYOR_MPI_CHECK(MPI_Allreduce(&blocks, &agreed, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  return static_cast<int>(std::min<long long>(agreed, std::numeric_limits<int>::max()));
}

// The leader's scheduler runs one step budget for all: each key the minimum over the world.
BatchChoice agreed_batch(BatchChoice c) {
  long long mine[2] = {c.budget.max_num_seqs, c.budget.max_num_batched_tokens}, agreed[2] = {0, 0};
  CONVEYOR_MPI_CHECK(MPI_Allreduce(mine, agreed, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  c.budget = {agreed[0], agreed[1]};
  return c;
}

// One rank's backend: its ops, sampler (null: the CPU sampler), the KV blocks it holds (before the
// agreement) and the step budget agreed over the world, which sized the blocks and the buffers.
struct BackendParts {
  std::unique_ptr<Ops> ops;
  std::unique_ptr<StageSampler> sampler;
  long long blocks = 0;
  BatchChoice batch;
};

// The CPU's KV does not depend on the step budget: the budget is chosen from the blocks.
BackendParts cpu_backend_parts(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                               const PagedKvShape& kv) {
  BackendParts p;
  p.ops = make_cpu_ops();
  p.blocks = cpu_kv_blocks(opt, static_cast<int>(share.last_layer - share.first_layer), kv, share.describe());
  const int64_t tokens = static_cast<int64_t>(p.blocks) * kv.block_size;
  p.batch = agreed_batch(choose_batch(opt.batch_request(spec, cpu_batch_rule()), tokens));
  return p;
}

#ifdef CONVEYOR_WITH_CUDA
// The budget first (every rank's choice, then the minimum), then the parts sized for it.
BackendParts cuda_backend_parts(const StageOptions& opt, const ModelSpec& spec, const WeightShare& share,
                                const WeightSet& weights, const PagedKvShape& kv, const CudaPlacement& place,
                                int world_rank) {
  const bool samples = share.lm_head && share.tp_rank == 0;
  BackendParts p;
  p.batch = agreed_batch(
      choose_cuda_batch(opt, spec, share, weights, kv, samples, place, opt.batch_request(spec, opt.gpu_rule())));
  CudaStageParts cuda = make_cuda_stage_parts(opt.with_batch(p.batch.budget), spec, share, weights, kv, samples, place);
  // Collective: every rank fails with the whole table when one of them has no room.
  const bool per_rank = opt.gpu_memory_utilization_per_rank > 0;
  const double util = per_rank ? opt.gpu_memory_utilization_per_rank : opt.gpu_memory_utilization;
  const std::vector<MemoryRow> rows = require_memory_fit(cuda.memory, util, per_rank);
  if (world_rank == 0 && opt.num_blocks <= 0) spdlog::info("{}", format_memory_table(rows, util, per_rank));
  p.ops = std::move(cuda.ops);
  p.sampler = std::move(cuda.sampler);
  p.blocks = cuda.kv_blocks;
  return p;
}
#endif

std::unique_ptr<Communicator> control_comm(MPI_Comm group, const std::string& name) {
  MPI_Comm dup = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(group, &dup));
  return std::make_unique<MpiCommunicator>(dup, name);
}

}  // namespace

PipelineParts make_pipeline_stage(const StageOptions& opt, const ModelSpec& model, const WorldConfig& world,
                                  ProcessGroups& groups, Backend backend, int device) {
  const ModelSpec spec = opt.quantized(model);
  const Layout& layout = world.layout();
  const RankCoord me = world.coord();
  const LayoutPlan plan = plan_layout(opt, spec, planning_ceilings(opt.device_profile));
  const auto ranges = plan.stage_ranges();
  WeightShare share;
  share.first_layer = ranges[static_cast<size_t>(me.stage)][0];
  share.last_layer = ranges[static_cast<size_t>(me.stage)][1];
  share.embedding = me.stage == 0;
  share.final_norm = share.lm_head = me.stage == layout.pipeline - 1;
  share.tp_rank = me.tensor;
  share.tp_size = layout.tensor;
  const ModelTraits traits = model_traits(spec, layout.tensor);

  PipelineParts parts;
  parts.partition = plan.layer_counts();
  StageLinks links;
  if (layout.tensor > 1) {
    links.tensor = groups.tensor.get();
    parts.control.push_back(control_comm(groups.tensor_mpi, "plan broadcast of stage " + std::to_string(me.stage)));
    links.tensor_ctl = parts.control.back().get();
  }
  if (layout.pipeline > 1) {
    links.pipeline = groups.pipeline.get();
    parts.control.push_back(control_comm(groups.pipeline_mpi, "pipeline control of tp rank " + std::to_string(me.tensor)));
    links.pipeline_ctl = parts.control.back().get();
    if (backend == Backend::kCpu) use_eager_messages(links);
  }
  WeightSet weights = open_share(spec, share, opt.weights);
  PagedKvShape kv;
  kv.block_size = opt.block_size;
  kv.n_kv_heads = traits.attention.n_kv_heads;
  kv.head_dim = static_cast<int>(spec.head_dim);
  BackendParts backend_parts;
  if (backend == Backend::kCuda) {
#ifdef CONVEYOR_WITH_CUDA
    CudaPlacement place;
    place.device = device;
    place.stage = me.stage;
    place.ranks_on_device = groups.ranks_on_device;
    place.graphs_capturable = links.tensor == nullptr || links.tensor->capturable();
    backend_parts = cuda_backend_parts(opt, spec, share, weights, kv, place, world.rank());
#else
    CONVEYOR_THROW("runtime.backend = cuda, but this conveyor was built without CUDA; rebuild with "
                   "-DCONVEYOR_WITH_CUDA=ON or use --set runtime.backend=cpu");
#endif
  } else {
    backend_parts = cpu_backend_parts(opt, spec, share, kv);
  }
  kv.num_blocks = agreed_kv_blocks(backend_parts.blocks);
  parts.batch = backend_parts.batch.budget;
  if (world.rank() == 0) {
    const int64_t kv_tokens = static_cast<int64_t>(kv.num_blocks) * kv.block_size;
    spdlog::info("{}", describe_batch(backend_parts.batch, opt.batch_request(spec, {}), kv_tokens));
  }
  parts.stage = std::make_unique<PipelineStage>(spec, share, std::move(weights), std::move(backend_parts.ops), kv,
                                                opt.kv_fp8(), me.stage, layout.pipeline, links,
                                                std::move(backend_parts.sampler));
  // Stage 0's layers speak for all: a checkpoint has KV scales for every layer or none.
  if (opt.calculate_kv_scales) parts.stage->calculate_kv_scales();
  const std::string kv_line = parts.stage->kv_cache_line();
  if (world.rank() == 0 && !kv_line.empty()) spdlog::info("{}", kv_line);
  parts.stage->set_cuda_graphs(opt.cuda_graphs);
  if (opt.gemm_warmup) warm_up_gemms(*parts.stage, parts.batch, world.rank() == 0);
  parts.stage->set_profile_step(opt.profile_step);
  if (backend == Backend::kCpu) parts.stage->set_max_outgoing(kCpuOutgoingMicroBatches);
  parts.micro_batches = micro_batches_for(opt.micro_batches, layout.pipeline);
  CONVEYOR_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  parts.stage->start_clock();
  return parts;
}

}  // namespace conveyor
