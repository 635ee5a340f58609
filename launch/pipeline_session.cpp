// PipelineSession (see pipeline_session.h).
#include "launch/pipeline_session.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/dist/launch_env.h"
#include "runtime/model/weight_hasher.h"

namespace conveyor {

namespace {
Layout layout_of(const Config& cfg) {
  return Layout{static_cast<int>(cfg.get_int("parallel.data")), static_cast<int>(cfg.get_int("parallel.pipeline")),
                static_cast<int>(cfg.get_int("parallel.tensor"))};
}
// Collective: every rank's chunk digests to rank 0, which assembles the file digests.
std::vector<WeightFileInfo> gather_weight_files(WeightHasher& hasher, MPI_Comm comm, int rank, int world) {
  std::vector<uint64_t> words = hasher.wait();  // a checksum mismatch is thrown here, by the rank that found it
  int count = static_cast<int>(words.size());
  std::vector<int> counts(static_cast<size_t>(world)), offsets(static_cast<size_t>(world));
  CONVEYOR_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  for (int r = 1; r < world; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<uint64_t> all(rank == 0 ? static_cast<size_t>(offsets.back() + counts.back()) : 0);
  CONVEYOR_MPI_CHECK(MPI_Gatherv(words.data(), count, MPI_UINT64_T, all.data(), counts.data(), offsets.data(),
                                 MPI_UINT64_T, 0, comm));
  if (rank != 0) return {};
  std::vector<std::vector<uint64_t>> per_rank(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) per_rank[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + counts[r]);
  return assemble_weight_digests(hasher.files(), per_rank);
}

}  // namespace

// Ranks on one host share its cores: without a count of its own each OpenMP runtime would take all
// of them. OMP_NUM_THREADS, when set, is the user's choice and stays (below --set runtime.cpu_threads).
int set_cpu_threads(const Config& cfg, const MpiRuntime& mpi, Backend backend) {
  const int requested = static_cast<int>(cfg.get_int("runtime.cpu_threads"));
  CpuThreads threads = choose_cpu_threads(requested, mpi.local_size());
  if (requested == 0 && std::getenv("OMP_NUM_THREADS")) threads = {omp_get_max_threads(), "OMP_NUM_THREADS"};
  omp_set_num_threads(threads.count);
  if (mpi.rank() == 0) {
    std::fprintf(stderr, "conveyor: %d rank(s), %s backend, %d CPU thread(s) per rank (%s)\n", mpi.size(),
                 backend_name(backend), threads.count, threads.source.c_str());
  }
  return threads.count;
}

PipelineSession::PipelineSession(const Config& cfg, int* argc, char*** argv)
    : owned_mpi_(std::make_unique<MpiRuntime>(argc, argv)), mpi_(*owned_mpi_) {
  init(cfg);
}

PipelineSession::PipelineSession(const Config& cfg, MpiRuntime& mpi) : mpi_(mpi) { init(cfg); }

void PipelineSession::init(const Config& cfg) {
  // A borrowed runtime's command has set up logging with it already.
  if (owned_mpi_) init_logging(mpi_.rank(), cfg.get_string("logging.level"));
  cfg.check_world_size(mpi_.size());
  world_ = std::make_unique<WorldConfig>(layout_of(cfg), mpi_.rank());
}

void PipelineSession::start(const Config& cfg, const ModelSpec& spec, int64_t workload_seq_len) {
  const Backend backend = resolve_backend(cfg.get_string("runtime.backend"));
  set_cpu_threads(cfg, mpi_, backend);
  // The GPU must be current before NCCL communicators are made on it.
  device_ = make_device(backend, mpi_.local_rank());
  groups_ = make_process_groups(*world_, backend, parse_data_transport(cfg.get_string("parallel.data_transport")));
  StageOptions stage_opt = StageOptions::from_config(cfg);
  stage_opt.workload_seq_len = workload_seq_len;
  std::unique_ptr<WeightHasher> hasher;  // runs while this rank's stage loads its weights
  if (!stage_opt.weights.dummy && cfg.get_bool("model.hash_weights"))
    hasher = std::make_unique<WeightHasher>(stage_opt.weights.path, mpi_.rank(), mpi_.size(),
                                            weight_hash_threads(mpi_.local_size()));
  parts_ = make_pipeline_stage(stage_opt, spec, *world_, *groups_, backend, std::max(0, device_->info().index));
  if (hasher) weight_files_ = gather_weight_files(*hasher, MPI_COMM_WORLD, mpi_.rank(), mpi_.size());
  CONVEYOR_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, is_leader() ? 0 : MPI_UNDEFINED, world_->data_rank(), &leaders_));
  if (world_->world_size() > 1) {
    Watchdog::Options opt;
    opt.deadline_s = cfg.get_float("runtime.watchdog_timeout");
    opt.stage = world_->stage();
    opt.tensor_rank = world_->tensor_rank();
    opt.heartbeat_world = MPI_COMM_WORLD;  // so the rank that fires can name the one that stopped
    watchdog_ = std::make_unique<Watchdog>(opt);
    for (Communicator* c : {groups_->tensor.get(), groups_->pipeline.get(), groups_->data.get()})
      if (c) watchdog_->watch(c);
    parts_.stage->set_watchdog(watchdog_.get());
  }
}

PipelineSession::~PipelineSession() {
  if (std::uncaught_exceptions() > 0) {
    // An error is on its way to main(), which aborts the job: tearing down communicators now could
    // block on peers (NCCL, MPI_Comm_free), so leave them to the process exit.
    (void)watchdog_.release();
    (void)parts_.stage.release();
    for (auto& c : parts_.control) (void)c.release();
    (void)groups_.release();
    (void)device_.release();
    return;
  }
  watchdog_.reset();
  if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
  parts_.stage.reset();
  parts_.control.clear();
  groups_.reset();
  device_.reset();
}

std::unique_ptr<ModelRunner> PipelineSession::make_runner() {
  CONVEYOR_CHECK(is_leader(), "internal: only the leader drives the engine");
  return std::make_unique<PipelineRunner>(*parts_.stage, parts_.micro_batches);
}

StepStamps* PipelineSession::enable_step_stamps() {
  CONVEYOR_CHECK(is_leader(), "internal: only the leader stamps steps");
  parts_.stage->enable_step_stamps();
  return parts_.stage->step_stamps();
}

EngineOptions PipelineSession::engine_options(const Config& cfg) const {
  EngineOptions o = EngineOptions::from_config(cfg);
  o.scheduler.max_num_seqs = parts_.batch.max_num_seqs;
  o.scheduler.max_num_batched_tokens = parts_.batch.max_num_batched_tokens;
  return o;
}

void PipelineSession::serve() { parts_.stage->serve(); }

std::optional<PipelineUsage> PipelineSession::finish(const std::string& trace_path) {
  const RankCoord me = world_->coord();
  std::vector<RankTimeline> all = gather_timelines(parts_.stage->timeline(), me.data, me.stage, me.tensor, MPI_COMM_WORLD);
  if (mpi_.rank() != 0) return std::nullopt;
  PipelineUsage usage = summarize_usage(all);
  if (!trace_path.empty()) {
    std::ofstream out(trace_path);
    CONVEYOR_CHECK(out.good(), "cannot write the trace to ", trace_path);
    out << chrome_trace(all, usage).dump() << "\n";
    CONVEYOR_CHECK(out.good(), "writing the trace to ", trace_path, " failed");
  }
  return usage;
}

std::string format_usage(const PipelineUsage& usage) {
  std::ostringstream os;
  char line[256];
  for (const StageUsage& s : usage.stages) {
    std::snprintf(line, sizeof line, "stage %d: busy %.1f%%, send %.1f%%, bubble %.1f%% (compute %.3f s of %.3f s)\n",
                  s.stage, s.busy_pct, s.send_pct, s.bubble_pct, s.compute_s, usage.window_s);
    os << line;
  }
  std::snprintf(line, sizeof line, "pipeline: busy %.1f%%, bubble %.1f%% averaged over %zu stages\n", usage.busy_pct,
                usage.bubble_pct, usage.stages.size());
  os << line;
  return os.str();
}

}  // namespace conveyor
