// The pipeline run of one rank, for `conveyor generate` (and bench): MPI, the layout checked against
// the world, the process groups and this rank's stage. The leader (stage 0, tp 0) drives an Engine
// through make_runner(); every other rank serves plans until the leader shuts the pipeline down. At
// the end all ranks gather their timelines: rank 0 gets the per-stage usage and writes the trace.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/dist/device.h"
#include "runtime/dist/mpi_runtime.h"
#include "runtime/dist/process_groups.h"
#include "runtime/dist/watchdog.h"
#include "runtime/dist/world_config.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_runner.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_digest.h"
#include "stages/pipeline_stage.h"
#include "stages/pipeline_trace.h"

namespace conveyor {

// The OpenMP threads of this rank (runtime.cpu_threads, else what the launcher gave it, else the host's
// CPUs over its local ranks; OMP_NUM_THREADS when set and the key is 0), set and said on rank 0's
// start-up line. `conveyor doctor` measures with the threads a run of the same config would use.
int set_cpu_threads(const Config& cfg, const MpiRuntime& mpi, Backend backend);

class PipelineSession {
 public:
  // MPI and the layout (checked against the world); no model work yet, so the leader can validate
  // its inputs first.
  PipelineSession(const Config& cfg, int* argc, char*** argv);
  // Over an MPI runtime a command already started (conveyor doctor's), which must outlive the
  // session: MPI is initialised once per process.
  PipelineSession(const Config& cfg, MpiRuntime& mpi);
  // Collective over MPI_COMM_WORLD: the process groups and this rank's stage (its share of the weights).
  // workload_seq_len: prompt + output tokens of the command's requests when it knows them (bench), which
  // an auto step budget is chosen for (runtime/engine/batch_budget.h); 0: the fallback length.
  void start(const Config& cfg, const ModelSpec& spec, int64_t workload_seq_len = 0);
  ~PipelineSession();

  bool is_leader() const { return world_->is_leader(); }  // of its replica
  int replicas() const { return world_->layout().data; }
  // The leaders of all replicas (rank = replica); MPI_COMM_NULL on other ranks. Made by start().
  MPI_Comm leaders() const { return leaders_; }
  int rank() const { return mpi_.rank(); }
  const WorldConfig& world() const { return *world_; }
  // This rank's device: its GPU (name, memory) or the host.
  DeviceInfo device_info() const { return device_->info(); }
  // Layers per stage as this run split them (plan_layout), for reports. Made by start().
  const std::vector<int64_t>& partition() const { return parts_.partition; }
  // Rank 0: the checkpoint's files with their digests, computed by start() while the weights loaded
  // (empty for dummy weights or with model.hash_weights off).
  const std::vector<WeightFileInfo>& weight_files() const { return weight_files_; }
  // Leader: the Engine's runner (it refers to this session, which must outlive it).
  std::unique_ptr<ModelRunner> make_runner();
  // Leader: the stage stamps its steps from now on (PipelineStage::enable_step_stamps); the engine
  // stamps its own with the returned recorder (Engine::set_step_stamps), which the session owns.
  StepStamps* enable_step_stamps();
  // Leader, after the run: every stamp, device spans read.
  StepStamps* step_stamps() { return parts_.stage->step_stamps(); }
  // The step budget the stages were sized for and agreed (the scheduler keys, or what start() chose for
  // auto ones). Made by start().
  const BatchBudget& batch() const { return parts_.batch; }
  // EngineOptions::from_config with the scheduler running batch(): every command's Engine takes these.
  EngineOptions engine_options(const Config& cfg) const;
  // Other ranks: run plans until shutdown.
  void serve();
  // Collective, after the leader's engine has shut down: rank 0 gets the usage (and writes the
  // Chrome trace to trace_path when not empty); other ranks get nothing.
  std::optional<PipelineUsage> finish(const std::string& trace_path);

 private:
  void init(const Config& cfg);

  std::unique_ptr<MpiRuntime> owned_mpi_;  // null when the session borrows the command's
  MpiRuntime& mpi_;
  std::unique_ptr<WorldConfig> world_;
  std::unique_ptr<Device> device_;  // this rank's GPU (current for its lifetime) or the host
  std::unique_ptr<ProcessGroups> groups_;
  PipelineParts parts_;
  std::unique_ptr<Watchdog> watchdog_;
  MPI_Comm leaders_ = MPI_COMM_NULL;
  std::vector<WeightFileInfo> weight_files_;
};

// One line per stage: "stage 1: busy 71.2%, send 0.4%, bubble 28.4% (compute 1.20 s of 1.69 s)".
std::string format_usage(const PipelineUsage& usage);

}  // namespace conveyor
