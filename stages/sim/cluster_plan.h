// `conveyor plan --cluster`: every dp x pp x tp layout of the cluster's GPUs that the model's heads
// allow (tp inside a node), each with M = pp and, for pipelines, M = 2 pp micro-batches in flight,
// simulated by simulate_layout and ranked by output tokens/s; each layout carries the reason it ranks
// where it does (bubble, KV room, all-reduce cost, network) and the chosen one a Slurm command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/sim/schedule_sim.h"

namespace conveyor {

struct RankedLayout {
  SimResult sim;
  std::string reason;
};

struct ClusterPlan {
  std::vector<RankedLayout> layouts;  // fitting layouts best first, then those that do not fit
  int64_t simulated_plans = 0;        // scheduler plans simulated over all layouts (the work done)
  int simulated_layouts = 0;
};

// Parses "prompts=1000,input=1024,output=1024,max_num_seqs=256,max_num_batched_tokens=8192" (any
// subset) over `base`; an unknown key is an error naming it.
SimWorkload parse_workload(const std::string& text, SimWorkload base);

// Every layout of the cluster's GPUs, or only `only` (each checked to fit the cluster's GPUs and the model).
ClusterPlan plan_cluster(const ModelSpec& spec, const ClusterSpec& cluster, const SimWorkload& w,
                         const std::vector<SimLayout>& only = {});

// What sets a layout's rank, in words (the largest of bubble, KV room, all-reduce, network shares).
std::string layout_reason(const SimResult& r, const SimWorkload& w);

// The srun line that runs `layout` on the cluster (model_arg: what --set model.config / --model gets).
std::string slurm_line(const ClusterSpec& c, const SimLayout& l, const std::string& model_arg);

std::string format_cluster_plan(const ModelSpec& spec, const ClusterSpec& c, const SimWorkload& w,
                                const ClusterPlan& plan, size_t top, const std::string& model_arg);
nlohmann::json cluster_plan_json(const ClusterSpec& c, const SimWorkload& w, const ClusterPlan& plan,
                                 const std::string& model_arg);

}  // namespace conveyor
