// The layer split made in one place for the run (make_pipeline_stage), `conveyor plan` and `conveyor
// bench`, so the plan printed is the plan run: the workload comes from the stage options (batch =
// scheduler.max_num_seqs, the layout, the micro-batches), the device ceilings from
// parallel.device_profile (a `conveyor doctor --output-json` file) or the roofline defaults, and the
// split from plan_partition over them (parallel.partition, when given, wins).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/spec.h"
#include "stages/partitioner.h"
#include "stages/stage_options.h"

namespace conveyor {

// A doctor JSON, parsed; throws naming `path` when it cannot be read or is not JSON.
nlohmann::json read_doctor_json(const std::string& path);

// The measured speeds of a parsed doctor JSON (`where`: its path, for errors) over the ceilings of the
// GPU it names (gpu_peaks.h; the H200's for a GPU not known there), its memory where it says
// (device.memory_gib); a CPU doctor's own ceilings.
DeviceCeilings ceilings_from_doctor(const nlohmann::json& doctor, const std::string& where);

// The links a doctor JSON measured: the slowest pipeline edge (lowest bandwidth, highest latency) and the
// slowest TP group (lowest all-reduce busbw, highest small-message latency); what it did not measure
// keeps LinkCosts' default. Errors name `where` and the expected keys.
LinkCosts links_from_doctor(const nlohmann::json& doctor, const std::string& where);

// The ceilings a split is planned with: ceilings_from_doctor of the file at `device_profile`, or the
// roofline defaults when it is empty.
DeviceCeilings planning_ceilings(const std::string& device_profile);

struct LayoutPlan {
  Workload workload;  // batch: scheduler.max_num_seqs, or with it auto what choose_batch makes of kv_tokens
  PartitionPlan partition;
  BatchChoice batch;      // the step budget a run of these options takes on this plan's memory
  int64_t kv_tokens = 0;  // what every stage holds per rank (plan_kv_tokens)
  BudgetRequest request;  // what the budget was chosen for (StageOptions::batch_request)
  // [first, last) layers of each stage.
  std::vector<std::array<int64_t, 2>> stage_ranges() const;
  // Layers per stage.
  std::vector<int64_t> layer_counts() const;
};

// The one check of a layout against a model, for `conveyor plan`, `conveyor generate` and bench alike:
// tp must split the heads and KV heads (check_tensor_parallel), pp <= layers, a given partition one
// count >= 1 per stage summing to the layers. Throws naming the numbers and what to pick instead.
void check_layout(const StageOptions& opt, const ModelSpec& spec);

// The workload and split for `opt` on `dev` (check_layout first). With scheduler.max_num_seqs auto the
// split is planned at kAutoPlanningBatch (as the run splits), then the batch choose_batch takes on that
// split's KV room (the GPU rule, or the CPU rule for a CPU doctor profile) is costed on the same split. `context`: the mean KV length the costs assume (the
// run plans with the cost model's default; `conveyor plan --context` may ask for another).
LayoutPlan plan_layout(const StageOptions& opt, const ModelSpec& spec, const DeviceCeilings& dev,
                       int64_t context = Workload{}.context);

}  // namespace conveyor
