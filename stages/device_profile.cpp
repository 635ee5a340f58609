// DeviceProfile (see device_profile.h): the curve fit doctor uses, the JSON reader the planner uses, and
// the GEMM time lookup. Units in the JSON are the doctor's printed ones (us, GB/s, TFLOP/s); inside, SI.
#include "stages/device_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/core/error.h"

namespace conveyor {

LinearCost fit_linear_cost(const std::vector<std::pair<double, double>>& pts) {
  CONVEYOR_CHECK(pts.size() >= 2, "fit_linear_cost needs at least two points, got ", pts.size());
  // Weighted least squares of t = a + b * bytes with weights 1 / t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) {
    CONVEYOR_CHECK(x > 0 && y > 0, "fit_linear_cost: bytes and time must be > 0, got ", x, " and ", y);
    const double w = 1.0 / (y * y);
    sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  const double det = sw * sxx - sx * sx;
  CONVEYOR_CHECK(det > 1e-12 * sw * sxx, "fit_linear_cost needs points of at least two different sizes");
  double b = (sw * sxy - sx * sy) / det;
  double a = (sy - b * sx) / sw;
  if (a < 0) {  // through the origin instead
    a = 0;
    b = sxy / sxx;
  }
  CONVEYOR_CHECK(b > 0, "fit_linear_cost: time does not grow with bytes (slope ", b, " s/byte)");
  return LinearCost{a, 1.0 / b};
}

namespace {

// Weighted least squares over the chosen columns of [1, bytes, n]; false when singular.
bool solve_columns(const std::vector<std::array<double, 3>>& pts, const std::array<bool, 3>& use, std::array<double, 3>* x) {
  double a[3][4] = {};
  for (const auto& p : pts) {
    const double w = 1.0 / (p[2] * p[2]), row[3] = {1.0, p[0], p[1]};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) a[i][j] += use[i] && use[j] ? w * row[i] * row[j] : 0.0;
    for (int i = 0; i < 3; ++i) a[i][3] += use[i] ? w * row[i] * p[2] : 0.0;
  }
  for (int i = 0; i < 3; ++i)
    if (!use[i]) a[i][i] = 1.0, a[i][3] = 0.0;
  for (int c = 0; c < 3; ++c) {  // Gauss-Jordan with partial pivoting
    int piv = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    if (std::abs(a[piv][c]) < 1e-300) return false;
    for (int j = 0; j < 4; ++j) std::swap(a[c][j], a[piv][j]);
    for (int r = 0; r < 3; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int j = 0; j < 4; ++j) a[r][j] -= f * a[c][j];
    }
  }
  for (int i = 0; i < 3; ++i) (*x)[i] = a[i][3] / a[i][i];
  return true;
}

}  // namespace

GemmBucket fit_gemm_cost(int64_t m, const std::vector<std::array<double, 3>>& pts) {
  CONVEYOR_CHECK(pts.size() >= 2, "fit_gemm_cost needs at least two shapes, got ", pts.size());
  // The full model first, then without a part that came out negative, down to bandwidth alone.
  for (const std::array<bool, 3>& use : {std::array<bool, 3>{true, true, true}, {false, true, true}, {true, true, false},
                                         {false, true, false}}) {
    std::array<double, 3> x{};
    if (!solve_columns(pts, use, &x) || x[0] < 0 || x[1] <= 0 || x[2] < 0) continue;
    GemmBucket b;
    b.m = m;
    b.cost = LinearCost{x[0], 1.0 / x[1]};
    b.row_s = x[2];
    return b;
  }
  CONVEYOR_THROW("fit_gemm_cost: time does not grow with bytes at m = ", m);
}

double CoreSharing::hold(double turn) const {
  if (turn <= 0) return slice_s;
  if (holds.empty()) return std::min(turn, slice_s);
  double t0 = 0, h0 = 0;
  for (const auto& [t1, h1] : holds) {
    if (turn <= t1) return std::min(slice_s, h0 + (h1 - h0) * (turn - t0) / (t1 - t0));
    t0 = t1, h0 = h1;
  }
  return std::min(slice_s, h0);
}

double CoreSharing::sticky(int ranks) const {
  double best = -1;
  int gap = 0;
  for (const auto& [n, v] : stickiness)
    if (best < 0 || std::abs(n - ranks) < gap) best = v, gap = std::abs(n - ranks);
  return best;
}

CoreSharing CoreSharing::in_pipeline(int ranks) const {
  CoreSharing c = *this;
  for (const auto& [n, v] : pipeline_speed) {
    if (n != ranks || ranks <= cpus) continue;
    for (size_t k = 0; k < v.size() && k < c.speed.size(); ++k)
      if (v[k] > 0) c.speed[k] = v[k];
  }
  return c;
}

double CoreSharing::at(int k) const {
  if (speed.empty() || k <= 1) return speed.empty() ? 1.0 : speed.front();
  const int n = static_cast<int>(speed.size());
  if (k <= n) return speed[static_cast<size_t>(k - 1)];
  return speed.back() * n / k;
}

double GemmBucket::time(double bytes, double n, double k) const {
  for (const GemmShapeTime& s : shapes)
    if (s.n == n && s.k == k) return time(bytes, n) + s.residual_s;
  return time(bytes, n);
}

double DeviceProfile::gemm_time(double m, double n, double k, double ab, double out, double peak_flops, bool fp8) const {
  const auto& b = fp8 ? gemm_decode_fp8 : gemm_decode;
  CONVEYOR_CHECK(!b.empty(), "DeviceProfile::gemm_time without measured ", fp8 ? "FP8 " : "", "GEMM buckets");
  const double bytes = (n * k + m * k) * ab + m * n * out;
  const double flops = 2.0 * m * n * k;
  double t = b.back().time(bytes, n, k);
  if (m <= static_cast<double>(b.front().m)) {
    t = b.front().time(bytes, n, k);
  } else {
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      const double lo = static_cast<double>(b[i].m), hi = static_cast<double>(b[i + 1].m);
      if (m > hi) continue;
      const double f = (m - lo) / (hi - lo);
      t = (1 - f) * b[i].time(bytes, n, k) + f * b[i + 1].time(bytes, n, k);
      break;
    }
  }
  return std::max(t, flops / peak_flops);
}

namespace {

// Reads the number at j[key] as a value > 0; `path` is the key's full name for the error.
double positive(const nlohmann::json& j, const char* key, const std::string& path, const std::string& where) {
  const std::string name = path + "." + key;
  CONVEYOR_CHECK(j.is_object() && j.contains(key), where, ": ", name, " is missing (`conveyor doctor "
                 "--output-json` writes it; rerun doctor, or delete the whole ", path, " section to plan with the "
                 "ideal roofline for it)");
  const nlohmann::json& v = j.at(key);
  CONVEYOR_CHECK(v.is_number(), where, ": ", name, " must be a number, got ", v.dump());
  const double x = v.get<double>();
  CONVEYOR_CHECK(std::isfinite(x) && x > 0, where, ": ", name, " must be > 0, got ", v.dump());
  return x;
}

LinearCost linear_cost(const nlohmann::json& j, const std::string& path, const std::string& where) {
  LinearCost c;
  c.bandwidth = positive(j, "bandwidth_gbps", path, where) * 1e9;
  const std::string name = path + ".fixed_us";
  CONVEYOR_CHECK(j.contains("fixed_us") && j.at("fixed_us").is_number() && j.at("fixed_us").get<double>() >= 0,
                 where, ": ", name, " must be a number >= 0, got ",
                 j.contains("fixed_us") ? j.at("fixed_us").dump() : std::string("nothing"));
  c.fixed_s = j.at("fixed_us").get<double>() * 1e-6;
  return c;
}

// A bucket's points ([{n, k, bytes, time_us, ...}] as doctor writes them) against its fit `b`.
std::vector<GemmShapeTime> gemm_shape_times(const GemmBucket& b, const nlohmann::json& pts, const std::string& path,
                                            const std::string& where) {
  CONVEYOR_CHECK(pts.is_array(), where, ": ", path, " must be an array of {n, k, bytes, time_us}");
  std::vector<GemmShapeTime> out;
  for (size_t i = 0; i < pts.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    const double n = positive(pts[i], "n", item, where);
    const double fit = b.time(positive(pts[i], "bytes", item, where), n);
    out.push_back({n, positive(pts[i], "k", item, where), positive(pts[i], "time_us", item, where) * 1e-6 - fit});
  }
  return out;
}

std::vector<GemmBucket> gemm_buckets(const nlohmann::json& g, const std::string& where,
                                     const std::string& path = "device.gemm_decode.buckets") {
  CONVEYOR_CHECK(g.contains("buckets") && g.at("buckets").is_array() && !g.at("buckets").empty(), where, ": ",
                 path, " must be a non-empty array of {m, fixed_us, bandwidth_gbps}");
  std::vector<GemmBucket> out;
  const auto& arr = g.at("buckets");
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    GemmBucket b;
    b.m = static_cast<int64_t>(positive(arr[i], "m", item, where));
    b.cost = linear_cost(arr[i], item, where);
    if (arr[i].contains("row_ns")) {
      CONVEYOR_CHECK(arr[i].at("row_ns").is_number() && arr[i].at("row_ns").get<double>() >= 0, where, ": ", item,
                     ".row_ns must be a number >= 0, got ", arr[i].at("row_ns").dump());
      b.row_s = arr[i].at("row_ns").get<double>() * 1e-9;
    }
    if (arr[i].contains("points")) b.shapes = gemm_shape_times(b, arr[i].at("points"), item + ".points", where);
    CONVEYOR_CHECK(out.empty() || b.m > out.back().m, where, ": ", item, ".m = ", b.m,
                   " must be larger than the bucket before it (", out.empty() ? 0 : out.back().m, ")");
    out.push_back(b);
  }
  return out;
}

// device.sharing: {cpus, speed: [s1, s2, ...]} with 0 < s <= 1.5 (a lone rank may be slower than two
// by noise, never much).
CoreSharing core_sharing(const nlohmann::json& j, const std::string& where) {
  const std::string path = "device.sharing";
  CoreSharing c;
  c.cpus = static_cast<int>(positive(j, "cpus", path, where));
  CONVEYOR_CHECK(j.contains("speed") && j.at("speed").is_array() && !j.at("speed").empty(), where, ": ", path,
                 ".speed must be a non-empty array of a rank's speed with 1, 2, ... ranks computing");
  for (const auto& v : j.at("speed")) {
    CONVEYOR_CHECK(v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1.5, where, ": ", path,
                   ".speed entries must be numbers in (0, 1.5], got ", v.dump());
    c.speed.push_back(v.get<double>());
  }
  const std::pair<const char*, double*> times[] = {
      {"hop_us", &c.hop_s}, {"busy_hop_us", &c.busy_hop_s}, {"slice_us", &c.slice_s}, {"quantum_us", &c.quantum_s}};
  for (const auto& [key, to] : times) {
    if (!j.contains(key)) continue;
    CONVEYOR_CHECK(j.at(key).is_number() && j.at(key).get<double>() >= 0, where, ": ", path, ".", key,
                   " must be a number >= 0, got ", j.at(key).dump());
    *to = j.at(key).get<double>() * 1e-6;
  }
  if (j.contains("stickiness")) {
    CONVEYOR_CHECK(j.at("stickiness").is_array(), where, ": ", path, ".stickiness must be an array of {ranks, value}");
    for (const auto& e : j.at("stickiness")) {
      CONVEYOR_CHECK(e.is_object() && e.contains("ranks") && e.contains("value") && e.at("ranks").is_number_integer() &&
                         e.at("value").is_number() && e.at("value").get<double>() >= 0 && e.at("value").get<double>() <= 1,
                     where, ": ", path, ".stickiness entries must be {ranks, value in [0, 1]}, got ", e.dump());
      const int ranks = e.at("ranks").get<int>();
      CONVEYOR_CHECK(c.stickiness.empty() || ranks > c.stickiness.back().first, where, ": ", path,
                     ".stickiness must be in ascending ranks, got ", e.dump());
      c.stickiness.emplace_back(ranks, e.at("value").get<double>());
    }
  }
  for (const char* key : {"hop_samples_us", "busy_hop_samples_us"}) {
    if (!j.contains(key)) continue;
    const nlohmann::json& v = j.at(key);
    const bool ok = v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) {
      return x.is_number() && x.get<double>() >= 0;
    });
    CONVEYOR_CHECK(ok, where, ": ", path, ".", key, " must be an array of numbers >= 0, got ", v.dump());
    std::vector<double>& out = std::string(key) == "hop_samples_us" ? c.hop_samples_s : c.busy_hop_samples_s;
    for (const auto& x : v) out.push_back(x.get<double>() * 1e-6);
  }
  if (j.contains("pipeline_speed")) {
    CONVEYOR_CHECK(j.at("pipeline_speed").is_array(), where, ": ", path, ".pipeline_speed must be an array of {ranks, speed}");
    for (const auto& e : j.at("pipeline_speed")) {
      const bool ok = e.is_object() && e.contains("ranks") && e.contains("speed") && e.at("ranks").is_number_integer() &&
                      e.at("speed").is_array() && e.at("speed").size() == e.at("ranks").get<size_t>() &&
                      std::all_of(e.at("speed").begin(), e.at("speed").end(),
                                  [](const nlohmann::json& v) {
                                    return v.is_number() && v.get<double>() >= 0 &&
                                           v.get<double>() <= CoreSharing::kMaxPipelineSpeed;
                                  });
      CONVEYOR_CHECK(ok, where, ": ", path, ".pipeline_speed entries must be {ranks, speed: ranks numbers in [0, 1.5]}, got ", e.dump());
      c.pipeline_speed.emplace_back(e.at("ranks").get<int>(), e.at("speed").get<std::vector<double>>());
    }
  }
  if (j.contains("holds")) {
    CONVEYOR_CHECK(j.at("holds").is_array(), where, ": ", path, ".holds must be an array of {turn_us, hold_us}");
    for (const auto& h : j.at("holds")) {
      CONVEYOR_CHECK(h.is_object() && h.contains("turn_us") && h.contains("hold_us") && h.at("turn_us").is_number() &&
                         h.at("hold_us").is_number() && h.at("turn_us").get<double>() > 0 && h.at("hold_us").get<double>() >= 0,
                     where, ": ", path, ".holds entries must be {turn_us > 0, hold_us >= 0}, got ", h.dump());
      const double turn = h.at("turn_us").get<double>() * 1e-6;
      CONVEYOR_CHECK(c.holds.empty() || turn > c.holds.back().first, where, ": ", path,
                     ".holds must be in ascending turn_us, got ", h.dump());
      c.holds.emplace_back(turn, h.at("hold_us").get<double>() * 1e-6);
    }
  }
  return c;
}

// The keys only the CPU backend's doctor writes (stages/cpu_probe.h).
void read_cpu_parts(const nlohmann::json& d, const std::string& where, DeviceProfile* p) {
  if (d.contains("dtype")) {
    const std::string dt = d.at("dtype").is_string() ? d.at("dtype").get<std::string>() : d.at("dtype").dump();
    CONVEYOR_CHECK(dt == "fp32" || dt == "bf16" || dt == "fp16", where, ": device.dtype must be fp32, bf16 or fp16, got ", dt);
    p->dtype_bytes = dt == "fp32" ? 4 : 2;
  }
  if (d.contains("padded_rows")) {
    CONVEYOR_CHECK(d.at("padded_rows").is_boolean(), where, ": device.padded_rows must be true or false");
    p->padded_rows = d.at("padded_rows").get<bool>();
  }
  if (d.contains("tflops")) p->ceiling_flops = positive(d, "tflops", "device", where) * 1e12;
  if (d.contains("bandwidth_gbps")) p->ceiling_bandwidth = positive(d, "bandwidth_gbps", "device", where) * 1e9;
  if (d.contains("small_ops")) p->small_ops = linear_cost(d.at("small_ops"), "device.small_ops", where);
  if (d.contains("sampling")) p->sampling = linear_cost(d.at("sampling"), "device.sampling", where);
  if (d.contains("sharing")) p->sharing = core_sharing(d.at("sharing"), where);
  if (d.contains("step_overhead")) {
    const nlohmann::json& o = d.at("step_overhead");
    CONVEYOR_CHECK(o.is_object() && o.contains("us") && o.at("us").is_number() && o.at("us").get<double>() >= 0, where,
                   ": device.step_overhead.us must be a number >= 0");
    p->measured_step_overhead_s = o.at("us").get<double>() * 1e-6;
  }
}

}  // namespace

DeviceProfile device_profile_from_json(const nlohmann::json& doctor, const std::string& where) {
  DeviceProfile p;
  if (!doctor.is_object() || !doctor.contains("device")) return p;
  const nlohmann::json& d = doctor.at("device");
  CONVEYOR_CHECK(d.is_object(), where, ": device must be an object, got ", d.dump());
  auto section = [&](const char* key) -> const nlohmann::json* {
    if (!d.contains(key)) return nullptr;
    CONVEYOR_CHECK(d.at(key).is_object(), where, ": device.", key, " must be an object");
    return &d.at(key);
  };
  if (const auto* g = section("gemm_decode")) p.gemm_decode = gemm_buckets(*g, where);
  if (const auto* g = section("gemm_prefill")) p.gemm_prefill_flops = positive(*g, "tflops", "device.gemm_prefill", where) * 1e12;
  if (const auto* g = section("gemm_decode_fp8")) {
    p.gemm_decode_fp8 = gemm_buckets(*g, where, "device.gemm_decode_fp8.buckets");
    p.gemm_prefill_fp8_flops = positive(*g, "prefill_tflops", "device.gemm_decode_fp8", where) * 1e12;
  }
  if (const auto* a = section("attention_decode")) p.attention_decode = linear_cost(*a, "device.attention_decode", where);
  if (const auto* a = section("attention_decode_fp8"))
    p.attention_decode_fp8 = linear_cost(*a, "device.attention_decode_fp8", where);
  if (const auto* a = section("attention_prefill"))
    p.attention_prefill_flops = positive(*a, "tflops", "device.attention_prefill", where) * 1e12;
  if (const auto* k = section("graph_kernel")) p.graph_kernel_s = positive(*k, "us", "device.graph_kernel", where) * 1e-6;
  read_cpu_parts(d, where, &p);
  if (p.any()) p.source = where;
  return p;
}

namespace {

// The host overhead and sampling lines of describe_device_model: measured by a CPU doctor, else the
// parameter and the assumption.
void host_and_sampling_lines(const DeviceProfile& p, std::vector<std::string>* out) {
  char line[320];
  const bool measured = p.measured_step_overhead_s >= 0 &&
                        std::abs(p.step_overhead_s - p.measured_step_overhead_s) < 1e-12;  // us -> s round trips
  std::snprintf(line, sizeof(line), "  host overhead per decode step and stage: %.0f us (%s)", p.step_overhead_s * 1e6,
                measured ? "measured by doctor: the leader's scheduler per plan" : "a parameter, not measured: --step-overhead-us");
  out->push_back(line);
  if (p.sampling.measured()) {
    std::snprintf(line, sizeof(line), "  sampling: measured, %.1f us + fp32 logit bytes / %.1f GB/s per row",
                  p.sampling.fixed_s * 1e6, p.sampling.bandwidth / 1e9);
    out->push_back(line);
  } else {
    out->push_back("  sampling: the fp32 logits written once, then 8 passes over them at the peak bandwidth (an "
                   "assumption, not measured)");
  }
}

}  // namespace

std::vector<std::string> describe_device_model(const DeviceProfile& p, double peak_flops, double peak_bw) {
  std::vector<std::string> out;
  char line[320];
  if (!p.any()) {
    std::snprintf(line, sizeof(line), "device model: ideal roofline (no doctor measurements): %.0f TFLOP/s, %.2f TB/s",
                  peak_flops / 1e12, peak_bw / 1e12);
    out.push_back(line);
  } else {
    out.push_back("device model: measured by conveyor doctor (" + p.source + ") where listed, ideal roofline elsewhere");
    std::string g = "  decode GEMMs: ";
    if (p.gemm_decode.empty()) {
      g += "ideal (not measured)";
    } else {
      g += "measured, time = fixed + bytes / bandwidth per m:";
      for (const auto& b : p.gemm_decode) {
        std::snprintf(line, sizeof(line), " m=%lld %.1f us + %.0f GB/s", static_cast<long long>(b.m),
                      b.cost.fixed_s * 1e6, b.cost.bandwidth / 1e9);
        g += line;
        if (b.row_s > 0) {
          std::snprintf(line, sizeof(line), " + %.0f ns per n", b.row_s * 1e9);
          g += line;
        }
        g += ";";
      }
      g.pop_back();
    }
    out.push_back(g);
    auto flops = [&](const char* what, double v) {
      const double f = v > 0 ? v : peak_flops;  // a CPU host's speeds are GFLOP/s
      std::snprintf(line, sizeof(line), "  %s: %s %.1f %s", what, v > 0 ? "measured" : "ideal (not measured)",
                    f >= 1e12 ? f / 1e12 : f / 1e9, f >= 1e12 ? "TFLOP/s" : "GFLOP/s");
      out.push_back(line);
    };
    flops("prefill GEMMs", p.gemm_prefill_flops);
    if (!p.gemm_decode_fp8.empty()) {
      std::string f = "  FP8 linears (quantize + e4m3 GEMM + scales): measured, per m:";
      for (const auto& b : p.gemm_decode_fp8) {
        std::snprintf(line, sizeof(line), " m=%lld %.1f us + %.0f GB/s;", static_cast<long long>(b.m),
                      b.cost.fixed_s * 1e6, b.cost.bandwidth / 1e9);
        f += line;
      }
      std::snprintf(line, sizeof(line), " prefill %.1f TFLOP/s", p.gemm_prefill_fp8_flops / 1e12);
      out.push_back(f + line);
    }
    if (p.attention_decode.measured()) {
      std::snprintf(line, sizeof(line), "  decode attention: measured, %.1f us + KV bytes / %.0f GB/s",
                    p.attention_decode.fixed_s * 1e6, p.attention_decode.bandwidth / 1e9);
    } else {
      std::snprintf(line, sizeof(line), "  decode attention: ideal (not measured), KV bytes / %.0f GB/s", peak_bw / 1e9);
    }
    out.push_back(line);
    if (p.attention_decode_fp8.measured()) {
      std::snprintf(line, sizeof(line), "  decode attention, FP8 cache: measured, %.1f us + KV bytes / %.0f GB/s",
                    p.attention_decode_fp8.fixed_s * 1e6, p.attention_decode_fp8.bandwidth / 1e9);
      out.push_back(line);
    }
    flops("prefill attention", p.attention_prefill_flops);
    if (p.small_ops.measured()) {
      std::snprintf(line, sizeof(line), "  small kernels (norms, rope, KV write, SiLU, add): measured on the CPU, "
                    "%.2f us each + bytes / %.1f GB/s", p.small_ops.fixed_s * 1e6, p.small_ops.bandwidth / 1e9);
    } else {
      std::snprintf(line, sizeof(line), "  small kernels (norms, rope, KV write, SiLU, add): %s %.2f us each + bytes at "
                    "%.2f TB/s", p.graph_kernel_s > 0 ? "measured in a CUDA graph," : "ideal (not measured),",
                    p.graph_kernel_s * 1e6, peak_bw / 1e12);
    }
    out.push_back(line);
  }
  host_and_sampling_lines(p, &out);
  return out;
}

}  // namespace conveyor
