// plan_layout and the planning ceilings (see layout_plan.h).
#include "stages/layout_plan.h"

#include <algorithm>
#include <fstream>

#include "runtime/core/error.h"
#include "runtime/model/weights_layout.h"
#include "stages/gpu_peaks.h"

namespace conveyor {

nlohmann::json read_doctor_json(const std::string& path) {
  std::ifstream in(path);
  CONVEYOR_CHECK(in.good(), "cannot read the doctor JSON ", path, "; write it with `conveyor doctor --output-json`");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_THROW("the doctor JSON ", path, " is not JSON: ", e.what());
  }
}

DeviceCeilings ceilings_from_doctor(const nlohmann::json& doctor, const std::string& where) {
  DeviceCeilings dev;
  dev.measured = device_profile_from_json(doctor, where);
  const nlohmann::json device = doctor.value("device", nlohmann::json::object());
  const bool cpu = dev.measured.ceiling_flops > 0;  // a CPU doctor's own ceilings; its memory_gib is the host's
  if (const GpuPeaks* gpu = cpu ? nullptr : find_gpu_peaks(device.value("name", std::string()))) {
    dev.label = gpu->label;
    dev.flops = gpu->flops;
    dev.bandwidth = gpu->bandwidth;
    dev.memory = gpu->memory;
  }
  if (cpu) {
    dev.label = "CPU";
    dev.flops = dev.measured.ceiling_flops;
  }
  if (dev.measured.ceiling_bandwidth > 0) dev.bandwidth = dev.measured.ceiling_bandwidth;
  if (const double gib = device.value("memory_gib", 0.0); !cpu && gib > 0) dev.memory = gib * (1ull << 30);
  return dev;
}

LinkCosts links_from_doctor(const nlohmann::json& j, const std::string& where) {
  LinkCosts links;
  try {
    double bw = 0, lat = 0, busbw = 0, ar_lat = 0;
    for (const auto& e : j.value("edges", nlohmann::json::array())) {
      const double b = e.at("bandwidth_gbps").get<double>() * 1e9;
      bw = bw == 0 ? b : std::min(bw, b);
      lat = std::max(lat, e.at("latency_us").get<double>() * 1e-6);
    }
    for (const auto& g : j.value("tensor_groups", nlohmann::json::array())) {
      const double b = g.at("busbw_gbps").get<double>() * 1e9;
      busbw = busbw == 0 ? b : std::min(busbw, b);
      if (g.contains("latency_us")) ar_lat = std::max(ar_lat, g.at("latency_us").get<double>() * 1e-6);
    }
    if (bw > 0) links.p2p_bandwidth = bw;
    if (lat > 0) links.p2p_latency = lat;
    if (busbw > 0) links.allreduce_busbw = busbw;
    if (ar_lat > 0) links.allreduce_latency = ar_lat;
  } catch (const nlohmann::json::exception& e) {
    CONVEYOR_THROW(where, ": ", e.what(), " (expected edges[].bandwidth_gbps, latency_us and "
                   "tensor_groups[].busbw_gbps as `conveyor doctor --output-json` writes)");
  }
  return links;
}

DeviceCeilings planning_ceilings(const std::string& device_profile) {
  if (device_profile.empty()) return DeviceCeilings{};
  return ceilings_from_doctor(read_doctor_json(device_profile), device_profile);
}

std::vector<std::array<int64_t, 2>> LayoutPlan::stage_ranges() const {
  std::vector<std::array<int64_t, 2>> ranges;
  for (const StageCost& s : partition.stages) ranges.push_back({s.first_layer, s.last_layer});
  return ranges;
}

std::vector<int64_t> LayoutPlan::layer_counts() const {
  std::vector<int64_t> counts;
  for (const StageCost& s : partition.stages) counts.push_back(s.last_layer - s.first_layer);
  return counts;
}

void check_layout(const StageOptions& opt, const ModelSpec& spec) {
  check_tensor_parallel(spec, opt.tensor);
  if (spec.layers < opt.pipeline) {
    CONVEYOR_THROW(spec.source, " has ", spec.layers, " layers, fewer than the ", opt.pipeline,
                   " pipeline stages asked for (parallel.pipeline); use at most ", spec.layers, " stages");
  }
  if (!opt.partition.empty()) check_partition(opt.partition, opt.pipeline, spec.layers);
}

LayoutPlan plan_layout(const StageOptions& opt, const ModelSpec& spec, const DeviceCeilings& dev, int64_t context) {
  LayoutPlan p;
  p.workload.batch = opt.max_num_seqs > 0 ? opt.max_num_seqs : kAutoPlanningBatch;
  p.workload.context = context;
  p.workload.pipeline = opt.pipeline;
  p.workload.tensor = opt.tensor;
  p.workload.micro_batches = opt.micro_batches;
  p.workload.max_tokens = opt.max_num_batched_tokens;
  // A GPU plan is 16-bit; a CPU doctor names its own activation width (fp32). A KV element takes
  // that width, or 1 byte with --kv-cache-dtype fp8.
  p.workload.kv_dtype_bytes = static_cast<int>(opt.kv_elem_bytes(DType::kBF16));
  if (dev.measured.dtype_bytes > 0) {
    p.workload.dtype_bytes = dev.measured.dtype_bytes;
    p.workload.kv_dtype_bytes = opt.kv_fp8() ? 1 : dev.measured.dtype_bytes;
  }
  // Layer weights: e4m3 (1 byte) with FP8 linears, else the activation width.
  p.workload.weight_dtype_bytes = opt.quantized(spec).quant.fp8_linears() ? 1 : p.workload.dtype_bytes;
  CONVEYOR_CHECK(p.workload.batch >= 1 && context >= 1, "the planned batch (", p.workload.batch, ") and context (",
                 context, ") must be >= 1");
  check_layout(opt, spec);
  p.partition = plan_partition(spec, p.workload, dev, opt.partition);
  p.request = opt.batch_request(spec, dev.measured.dtype_bytes == 4 ? cpu_batch_rule() : opt.gpu_rule());
  p.kv_tokens = opt.num_blocks > 0 ? opt.num_blocks * opt.block_size : plan_kv_tokens(p.partition, opt.block_size);
  p.batch = choose_batch(p.request, p.kv_tokens);
  if (p.batch.budget.max_num_seqs != p.workload.batch) {
    p.workload.batch = p.batch.budget.max_num_seqs;
    p.workload.max_tokens = p.batch.budget.max_num_batched_tokens;
    p.partition = plan_partition(spec, p.workload, dev, p.layer_counts());
  }
  return p;
}

}  // namespace conveyor
