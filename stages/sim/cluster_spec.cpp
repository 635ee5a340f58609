// Cluster YAML reader and presets (see cluster_spec.h). Preset numbers: the H200 ones are what
// `conveyor doctor` and the benchmarks measured here (810 TFLOP/s cuBLASLt bf16, 4.28 TB/s copy); the
// H100 shares the H200's GH100 die (same FLOP/s) with 3.35 of its 4.8 TB/s HBM; network presets are
// the wire rate at ~90% (what NCCL p2p reaches) with typical RDMA / RoCE latencies.
#include "stages/sim/cluster_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "stages/gpu_peaks.h"
#include "stages/layout_plan.h"

namespace conveyor {

namespace {

// "cpu" has no numbers of its own: doctor_json gives them all (read_gpu); the GPUs are gpu_peaks.h's.
constexpr GpuPeaks kCpuPreset{"cpu", "CPU", 0, 0, 0, 0};
const GpuPeaks* gpu_preset(const std::string& name) { return name == kCpuPreset.preset ? &kCpuPreset : find_gpu_peaks(name); }

const std::map<std::string, LinkSpec>& link_presets() {
  static const std::map<std::string, LinkSpec> p = {
      {"nvlink-h200", {"NVLink 4 (H200)", 360e9, 11e-6, 300e9}},
      {"nvlink-h100", {"NVLink 4 (H100)", 360e9, 11e-6, 300e9}},
      {"ib-ndr-400", {"InfiniBand NDR 400 Gb/s", 45e9, 8e-6, 0}},
      {"eth-200", {"Ethernet 200 Gb/s (RoCE)", 22.5e9, 15e-6, 0}},
      {"eth-100", {"Ethernet 100 Gb/s (RoCE)", 11.25e9, 20e-6, 0}},
  };
  return p;
}

std::vector<std::string> link_preset_names() {
  std::vector<std::string> v;
  for (const auto& [k, _] : link_presets()) v.push_back(k);
  return v;
}

struct Reader {
  std::string path;
  std::string where(const std::string& key) const { return path + ": " + key; }
  double number(const YAML::Node& n, const std::string& key, double fallback) const {
    if (!n || !n.IsDefined() || n.IsNull()) return fallback;
    try {
      return n.as<double>();
    } catch (const YAML::Exception&) {
      CONVEYOR_THROW(where(key), " must be a number, got '", n.as<std::string>(""), "'");
    }
  }
  std::string text(const YAML::Node& n, const std::string& key, const std::string& fallback) const {
    if (!n || !n.IsDefined() || n.IsNull()) return fallback;
    CONVEYOR_CHECK(n.IsScalar(), where(key), " must be a string");
    return n.as<std::string>();
  }
  // A path relative to the cluster file's folder.
  std::string relative(const std::string& p) const {
    if (p.empty() || p[0] == '/') return p;
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? p : path.substr(0, slash + 1) + p;
  }
};

// `doctor`: the links of the doctor JSON (its slowest edge and TP group).
LinkSpec doctor_link(const Reader& r, const std::string& key, const std::string& doctor) {
  CONVEYOR_CHECK(!doctor.empty(), r.where(key), ": 'doctor' takes the links of gpu.doctor_json, which is not given");
  const LinkCosts c = links_from_doctor(read_doctor_json(doctor), doctor);
  return LinkSpec{"measured by conveyor doctor (" + doctor + ")", c.p2p_bandwidth, c.p2p_latency, c.allreduce_busbw,
                  c.allreduce_latency};
}

// `key: preset`, `key: doctor` or `key: {preset: name, field: value, ...}`.
LinkSpec read_link(const Reader& r, const YAML::Node& n, const std::string& key, const std::string& fallback,
                   const std::string& doctor) {
  const bool map = n && n.IsMap();
  const std::string preset = map ? r.text(n["preset"], key + ".preset", "") : r.text(n, key, fallback);
  LinkSpec l;
  if (preset == "doctor") {
    l = doctor_link(r, key, doctor);
  } else if (!preset.empty()) {
    auto it = link_presets().find(preset);
    CONVEYOR_CHECK(it != link_presets().end(), r.where(key), ": unknown link preset '", preset, "'",
                   did_you_mean(preset, link_preset_names()), " (presets: ", join(link_preset_names(), ", "), ")");
    l = it->second;
  }
  if (map) {
    l.name = r.text(n["name"], key + ".name", l.name.empty() ? key : l.name);
    l.bandwidth = r.number(n["bandwidth_gbps"], key + ".bandwidth_gbps", l.bandwidth / 1e9) * 1e9;
    l.latency = r.number(n["latency_us"], key + ".latency_us", l.latency * 1e6) * 1e-6;
    l.allreduce_busbw = r.number(n["allreduce_busbw_gbps"], key + ".allreduce_busbw_gbps", l.allreduce_busbw / 1e9) * 1e9;
    if (n["allreduce_latency_us"]) l.allreduce_latency = r.number(n["allreduce_latency_us"], key + ".allreduce_latency_us", 0) * 1e-6;
  }
  CONVEYOR_CHECK(l.bandwidth > 0 && l.latency >= 0, r.where(key), " needs bandwidth_gbps > 0 and latency_us >= 0 "
                 "(or a preset: ", join(link_preset_names(), ", "), ")");
  return l;
}

// gpu: the preset, its doctor JSON and overrides into c; returns the doctor JSON's path ("" for none).
// A CPU (`preset: cpu`) takes every number from its doctor JSON, written on the CPU backend.
std::string read_gpu(const Reader& r, const YAML::Node& g, ClusterSpec* c) {
  const bool gmap = g && g.IsMap();
  c->gpu_name = gmap ? r.text(g["preset"], "gpu.preset", "h200") : r.text(g, "gpu", "h200");
  const GpuPeaks* preset = gpu_preset(c->gpu_name);
  CONVEYOR_CHECK(preset != nullptr && c->gpu_name == preset->preset, r.where("gpu"), ": unknown GPU preset '",
                 c->gpu_name, "' (presets: h200, h100, cpu)");
  const std::string doctor = gmap ? r.relative(r.text(g["doctor_json"], "gpu.doctor_json", "")) : "";
  GpuPeaks p = *preset;
  double memory_gib = p.memory / (1ull << 30);
  if (!doctor.empty()) {
    const nlohmann::json j = read_doctor_json(doctor);
    c->gpu = ceilings_from_doctor(j, doctor);
    if (c->cpu()) {
      CONVEYOR_CHECK(j.value("backend", "") == "cpu" && c->gpu.measured.ceiling_flops > 0 &&
                         c->gpu.measured.ceiling_bandwidth > 0, r.where("gpu.doctor_json"), ": ", doctor,
                     " is not a doctor JSON of the CPU backend (run `mpirun -np N conveyor doctor --output-json F` "
                     "with --set runtime.backend=cpu)");
      p.flops = p.fp8_flops = c->gpu.measured.ceiling_flops;
      p.bandwidth = c->gpu.measured.ceiling_bandwidth;
      memory_gib = j.at("device").value("memory_gib", 0.0);
    }
  }
  CONVEYOR_CHECK(!c->cpu() || !doctor.empty(), r.where("gpu"), ": preset cpu takes its speeds from gpu.doctor_json "
                 "(`conveyor doctor --output-json` on the CPU backend), which is not given");
  // A gpu.<key> override in the file's units, else the preset's value.
  auto field = [&](const char* key, double fallback) {
    return gmap ? r.number(g[key], std::string("gpu.") + key, fallback) : fallback;
  };
  c->gpu.label = p.label;
  c->gpu.flops = field("tflops", p.flops / 1e12) * 1e12;
  c->fp8_flops = field("fp8_tflops", p.fp8_flops / 1e12) * 1e12;
  c->gpu.bandwidth = field("bandwidth_tbs", p.bandwidth / 1e12) * 1e12;
  c->gpu.memory = field("memory_gib", memory_gib) * (1ull << 30);
  const DeviceProfile& m = c->gpu.measured;
  if (m.any())
    c->gpu.measured.step_overhead_s =
        field("step_overhead_us", m.measured_step_overhead_s >= 0 ? m.measured_step_overhead_s * 1e6 : kDefaultStepOverheadUs) * 1e-6;
  return doctor;
}

}  // namespace

std::string precision_name(Precision p) {
  return p == Precision::kFp8 ? "fp8" : p == Precision::kFp32 ? "fp32" : "bf16";
}

DeviceCeilings ClusterSpec::ceilings() const {
  DeviceCeilings d = gpu;
  if (precision == Precision::kFp8) {
    const double gain = fp8_flops / gpu.flops;
    d.flops = fp8_flops;
    // Prefill GEMMs: doctor's FP8 linears where measured (quantize and scales included), else the bf16 rate
    // scaled to the FP8 peak.
    if (d.measured.gemm_prefill_fp8_flops > 0) d.measured.gemm_prefill_flops = d.measured.gemm_prefill_fp8_flops;
    else if (d.measured.gemm_prefill_flops > 0) d.measured.gemm_prefill_flops *= gain;
  }
  return d;
}

LinkCosts ClusterSpec::tensor_links() const {
  LinkCosts l;
  l.allreduce_busbw = intra_node.allreduce_busbw > 0 ? intra_node.allreduce_busbw : intra_node.bandwidth;
  l.allreduce_latency = intra_node.allreduce_latency >= 0 ? intra_node.allreduce_latency : intra_node.latency;
  l.p2p_bandwidth = intra_node.bandwidth;
  l.p2p_latency = intra_node.latency;
  return l;
}

ClusterSpec load_cluster_spec(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    CONVEYOR_THROW("cannot read the cluster file ", path, ": ", e.what());
  }
  CONVEYOR_CHECK(root.IsMap(), path, ": a cluster file is a map of nodes, gpus_per_node, gpu, intra_node, network, precision");
  const Reader r{path};
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    static const std::vector<std::string> known = {"name", "nodes", "gpus_per_node", "gpu", "intra_node", "network", "precision"};
    CONVEYOR_CHECK(std::find(known.begin(), known.end(), k) != known.end(), r.where(k), ": unknown key",
                   did_you_mean(k, known));
  }
  ClusterSpec c;
  c.source = path;
  c.name = r.text(root["name"], "name", path);
  c.nodes = static_cast<int>(r.number(root["nodes"], "nodes", 1));
  c.gpus_per_node = static_cast<int>(r.number(root["gpus_per_node"], "gpus_per_node", 8));
  CONVEYOR_CHECK(c.nodes >= 1 && c.gpus_per_node >= 1, r.where("nodes"), " and gpus_per_node must be >= 1");

  const std::string doctor = read_gpu(r, root["gpu"], &c);
  c.intra_node = read_link(r, root["intra_node"], "intra_node", c.cpu() ? "doctor" : "nvlink-" + c.gpu_name, doctor);
  c.network = read_link(r, root["network"], "network", "ib-ndr-400", doctor);
  const std::string prec = r.text(root["precision"], "precision", c.cpu() ? "fp32" : "bf16");
  CONVEYOR_CHECK(c.cpu() ? prec == "fp32" : prec == "bf16" || prec == "fp8", r.where("precision"), " must be ",
                 c.cpu() ? "fp32 on a CPU (the CPU backend computes in fp32)" : "bf16 or fp8 on a GPU", ", got '", prec, "'");
  c.precision = prec == "fp8" ? Precision::kFp8 : prec == "fp32" ? Precision::kFp32 : Precision::kBf16;
  return c;
}

}  // namespace conveyor
