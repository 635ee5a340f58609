// Layout search, reasons, printing and JSON of `conveyor plan --cluster` (see cluster_plan.h).
#include "stages/sim/cluster_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "stages/partitioner.h"

namespace conveyor {

namespace {

// A loss below this share of the run is not named as a reason.
constexpr double kReasonFloor = 0.03;

std::string pct(double x) { return std::to_string(static_cast<int>(std::lround(100 * x))) + "%"; }

// A scheduler key of the workload: its value, or "auto" (each layout's from its KV room).
std::string budget_text(int64_t v) { return v > 0 ? std::to_string(v) : "auto (from each layout's KV room)"; }

std::string partition_text(const SimResult& r) {
  std::vector<std::string> parts;
  for (const SimStage& s : r.stages) parts.push_back(std::to_string(s.last_layer - s.first_layer));
  std::string t = join(parts, "+");
  return t.size() <= 22 ? t : t.substr(0, 19) + "...";
}

// The busiest rank's weights + KV, in GiB.
std::string memory_text(const SimResult& r) {
  const SimStage* worst = &r.stages.front();
  for (const SimStage& s : r.stages)
    if (s.weight_bytes + s.kv_bytes > worst->weight_bytes + worst->kv_bytes) worst = &s;
  char t[64];
  std::snprintf(t, sizeof(t), "%.0f+%.0f", worst->weight_bytes / (1ull << 30), worst->kv_bytes / (1ull << 30));
  return t;
}

}  // namespace

SimWorkload parse_workload(const std::string& text, SimWorkload w) {
  for (const std::string& item : split(text, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    CONVEYOR_CHECK(eq != std::string::npos, "--workload: '", item, "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    int64_t v = 0;
    try {
      size_t used = 0;
      v = std::stoll(value, &used);
      CONVEYOR_CHECK(used == value.size(), "");
    } catch (const std::exception&) {
      CONVEYOR_THROW("--workload: ", key, " must be an integer, got '", value, "'");
    }
    const bool auto_ok = key == "max_num_seqs" || key == "max_num_batched_tokens";  // 0: from memory
    CONVEYOR_CHECK(v >= (auto_ok ? 0 : 1), "--workload: ", key, " must be >= ", auto_ok ? "0 (0: from memory)" : "1",
                   ", got ", v);
    static const std::vector<std::string> keys = {"prompts", "input", "output", "max_num_seqs", "max_num_batched_tokens"};
    if (key == "prompts") w.num_prompts = v;
    else if (key == "input") w.input_len = v;
    else if (key == "output") w.output_len = v;
    else if (key == "max_num_seqs") w.max_num_seqs = v;
    else if (key == "max_num_batched_tokens") w.max_num_batched_tokens = v;
    else CONVEYOR_THROW("--workload: unknown key '", key, "'", did_you_mean(key, keys), " (keys: ", join(keys, ", "), ")");
  }
  return w;
}

namespace {

// Every dp x pp x tp layout of G GPUs with tp inside a node, M = pp and, for pipelines, M = 2 pp.
std::vector<SimLayout> all_layouts(const ModelSpec& spec, const ClusterSpec& c) {
  std::vector<SimLayout> out;
  const int G = c.gpus();
  for (int tp = 1; tp <= std::min(G, c.gpus_per_node); ++tp) {
    if (G % tp != 0 || !tensor_parallel_fits(spec, tp)) continue;
    for (int pp = 1; pp <= G / tp && pp <= spec.layers; ++pp) {
      if ((G / tp) % pp != 0) continue;
      for (int m : {pp, 2 * pp}) {
        if (m == 2 * pp && pp == 1) continue;
        SimLayout l;
        l.data = G / (tp * pp), l.pipeline = pp, l.tensor = tp, l.micro_batches = m;
        out.push_back(l);
      }
    }
  }
  CONVEYOR_CHECK(!out.empty(), "no layout of ", G, " GPUs splits ", spec.source, "'s ", spec.heads, " heads and ",
                 spec.kv_heads, " KV heads inside a node of ", c.gpus_per_node);
  return out;
}

void check_given(const ModelSpec& spec, const ClusterSpec& c, const SimLayout& l) {
  CONVEYOR_CHECK(l.data >= 1 && l.pipeline >= 1 && l.tensor >= 1 && l.gpus() <= c.gpus(), "the layout data ", l.data,
                 " x pipeline ", l.pipeline, " x tensor ", l.tensor, " needs ", l.gpus(), " GPUs but ", c.source, " has ",
                 c.gpus());
  CONVEYOR_CHECK(l.tensor <= c.gpus_per_node && tensor_parallel_fits(spec, l.tensor), "tensor ", l.tensor,
                 " must split ", spec.source, "'s ", spec.heads, " heads and ", spec.kv_heads, " KV heads inside a node of ",
                 c.gpus_per_node);
  CONVEYOR_CHECK(l.pipeline <= spec.layers, "pipeline ", l.pipeline, " is more stages than ", spec.source, "'s ",
                 spec.layers, " layers");
}

}  // namespace

ClusterPlan plan_cluster(const ModelSpec& spec, const ClusterSpec& c, const SimWorkload& w,
                         const std::vector<SimLayout>& only) {
  ClusterPlan out;
  for (const SimLayout& l : only) check_given(spec, c, l);
  const std::vector<SimLayout> layouts = only.empty() ? all_layouts(spec, c) : only;
  // The layouts are independent simulations (pure functions of their inputs): one per thread, results in
  // the layouts' order, so the ranking is the same on any number of threads. An error is rethrown here.
  const auto n = static_cast<int64_t>(layouts.size());
  std::vector<SimResult> sims(layouts.size());
  std::vector<std::exception_ptr> errors(layouts.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      sims[static_cast<size_t>(i)] = simulate_layout(spec, c, w, layouts[static_cast<size_t>(i)]);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (SimResult& sim : sims) {
    RankedLayout r{std::move(sim), ""};
    out.simulated_plans += r.sim.plans;
    if (r.sim.fits) ++out.simulated_layouts;
    r.reason = r.sim.fits ? layout_reason(r.sim, w) : "does not fit: " + r.sim.why_not;
    out.layouts.push_back(std::move(r));
  }
  std::stable_sort(out.layouts.begin(), out.layouts.end(), [](const RankedLayout& a, const RankedLayout& b) {
    if (a.sim.fits != b.sim.fits) return a.sim.fits;
    return a.sim.output_tokens_per_s > b.sim.output_tokens_per_s;
  });
  return out;
}

std::string layout_reason(const SimResult& r, const SimWorkload& w) {
  std::vector<std::pair<double, std::string>> losses;
  double bubble = 0, allreduce = 0, net = 0;
  int crossing = 0;
  for (const SimStage& s : r.stages) {
    bubble = std::max(bubble, s.bubble);
    allreduce = std::max(allreduce, s.allreduce_s / (s.compute_s + s.allreduce_s));
    if (s.edge_crosses_node) {
      ++crossing;
      net = std::max(net, s.send_s / r.elapsed_s);
    }
  }
  losses.push_back({bubble, "bubble " + pct(bubble)});
  losses.push_back({allreduce, "all-reduce " + pct(allreduce) + " of stage time"});
  if (crossing > 0) losses.push_back({net, "network: " + std::to_string(crossing) + " edges cross nodes, " + pct(net) + " of the run sending"});
  const int64_t want = std::min(r.max_num_seqs, r.replica_requests);
  const double kv_short = 1.0 - static_cast<double>(r.peak_running) / static_cast<double>(want);
  losses.push_back({kv_short + (r.preemptions > 0 ? kReasonFloor : 0.0),
                    "KV room: " + std::to_string(r.peak_running) + " of " + std::to_string(want) +
                        " sequences run at once, " + std::to_string(r.preemptions) + " preemptions"});
  std::stable_sort(losses.begin(), losses.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> named;
  for (const auto& [share, text] : losses)
    if (share >= kReasonFloor && named.size() < 2) named.push_back(text);
  if (named.empty()) return "no loss above " + pct(kReasonFloor) + ": stages busy, full batch, links hidden";
  return join(named, "; ");
}

std::string slurm_line(const ClusterSpec& c, const SimLayout& l, const std::string& model_arg) {
  const int nodes = (l.gpus() + c.gpus_per_node - 1) / c.gpus_per_node;
  std::ostringstream os;
  os << "srun --mpi=pmix -N " << nodes << " --ntasks-per-node=" << std::min(c.gpus_per_node, l.gpus())
     << " --gpus-per-task=1 --gpu-bind=closest conveyor generate --set model.config=" << model_arg << " -dp " << l.data
     << " -pp " << l.pipeline << " -tp " << l.tensor << " --set parallel.micro_batches=" << l.micro_batches
     << (c.precision == Precision::kFp8 ? " --quantization fp8 --kv-cache-dtype fp8" : "")
     << " --input requests.jsonl --output results.jsonl";
  return os.str();
}

std::string format_cluster_plan(const ModelSpec& spec, const ClusterSpec& c, const SimWorkload& w,
                                const ClusterPlan& plan, size_t top, const std::string& model_arg) {
  std::ostringstream os;
  os << "cluster: " << c.name << " (" << c.nodes << " nodes x " << c.gpus_per_node << " " << c.gpu_name << ", "
     << c.intra_node.name << ", " << (c.nodes > 1 ? c.network.name : "one node: no network") << ", "
     << precision_name(c.precision) << ")\n"
     << "model: " << spec.source << ", " << spec.layers << " layers, hidden " << spec.hidden << "\nworkload: "
     << w.num_prompts << " prompts, " << w.input_len << " in / " << w.output_len << " out, max_num_seqs "
     << budget_text(w.max_num_seqs) << ", max_num_batched_tokens " << budget_text(w.max_num_batched_tokens) << "\n\n"
     << " rank  dp x pp x tp    M  partition               out tok/s  per GPU  TTFT p50  TPOT p50  GiB w+KV  reason\n";
  char line[512];
  for (size_t i = 0; i < plan.layouts.size() && i < top; ++i) {
    const SimResult& r = plan.layouts[i].sim;
    const std::string layout = std::to_string(r.layout.data) + " x " + std::to_string(r.layout.pipeline) + " x " +
                               std::to_string(r.layout.tensor);
    if (!r.fits) {
      std::snprintf(line, sizeof(line), " %4zu  %-13s %3d  %s\n", i + 1, layout.c_str(), r.layout.micro_batches,
                    plan.layouts[i].reason.c_str());
    } else {
      std::snprintf(line, sizeof(line), " %4zu  %-13s %3d  %-22s %10.0f  %7.0f  %7.2fs  %6.1fms  %8s  %s\n", i + 1,
                    layout.c_str(), r.layout.micro_batches, partition_text(r).c_str(), r.output_tokens_per_s,
                    r.per_gpu_tokens_per_s, r.ttft_p50, 1e3 * r.tpot_p50, memory_text(r).c_str(),
                    plan.layouts[i].reason.c_str());
    }
    os << line;
  }
  os << "\n" << plan.simulated_layouts << " layouts simulated (" << plan.simulated_plans << " scheduler plans), "
     << plan.layouts.size() - static_cast<size_t>(plan.simulated_layouts) << " do not fit\n";
  if (!plan.layouts.empty() && plan.layouts.front().sim.fits)
    os << "run the best with:\n  " << slurm_line(c, plan.layouts.front().sim.layout, model_arg) << "\n";
  return os.str();
}

nlohmann::json cluster_plan_json(const ClusterSpec& c, const SimWorkload& w, const ClusterPlan& plan,
                                 const std::string& model_arg) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RankedLayout& rl : plan.layouts) {
    const SimResult& r = rl.sim;
    nlohmann::json stages = nlohmann::json::array();
    for (const SimStage& s : r.stages)
      stages.push_back({{"layers", {s.first_layer, s.last_layer}}, {"compute_s", s.compute_s},
                        {"allreduce_s", s.allreduce_s}, {"overhead_s", s.overhead_s}, {"send_s", s.send_s},
                      {"bubble", s.bubble},
                        {"edge_crosses_node", s.edge_crosses_node}, {"weight_bytes", s.weight_bytes},
                        {"kv_bytes", s.kv_bytes}, {"memory_bytes", s.weight_bytes + s.kv_bytes}});
    rows.push_back({{"data", r.layout.data}, {"pipeline", r.layout.pipeline}, {"tensor", r.layout.tensor},
                    {"micro_batches", r.layout.micro_batches}, {"fits", r.fits}, {"why_not", r.why_not},
                    {"elapsed_s", r.elapsed_s}, {"output_tokens_per_s", r.output_tokens_per_s},
                    {"per_gpu_tokens_per_s", r.per_gpu_tokens_per_s},
                    {"ttft_s", {{"p50", r.ttft_p50}, {"p90", r.ttft_p90}, {"p99", r.ttft_p99}}},
                    {"tpot_s", {{"p50", r.tpot_p50}, {"p90", r.tpot_p90}, {"p99", r.tpot_p99}}},
                    {"stages", stages}, {"num_blocks", r.num_blocks}, {"plans", r.plans},
                    {"preemptions", r.preemptions}, {"peak_running", r.peak_running},
                    {"replica_requests", r.replica_requests}, {"max_num_seqs", r.max_num_seqs},
                    {"max_num_batched_tokens", r.max_num_batched_tokens}, {"reason", rl.reason},
                    {"slurm", r.fits ? slurm_line(c, r.layout, model_arg) : ""}});
  }
  return {{"cluster", {{"file", c.source}, {"name", c.name}, {"nodes", c.nodes}, {"gpus_per_node", c.gpus_per_node},
                       {"gpu", c.gpu_name}, {"measured", c.gpu.measured.any()}, {"precision", precision_name(c.precision)},
                       {"intra_node", c.intra_node.name}, {"network", c.network.name}}},
          {"workload", {{"prompts", w.num_prompts}, {"input", w.input_len}, {"output", w.output_len},
                        {"max_num_seqs", w.max_num_seqs}, {"max_num_batched_tokens", w.max_num_batched_tokens}}},
          {"simulated_layouts", plan.simulated_layouts}, {"simulated_plans", plan.simulated_plans}, {"layouts", rows}};
}

}  // namespace conveyor
