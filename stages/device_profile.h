// The planner's measured inputs: component speeds `conveyor doctor --output-json` writes under "device"
// (GEMM per decode m bucket, prefill GEMM, paged decode/prefill attention, a kernel inside a CUDA graph)
// and link costs under "edges"/"tensor_groups". Every part is optional: a missing one leaves the ideal
// roofline for that part, and describe_device_model() says which parts were measured and which not.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

// time = fixed_s + bytes / bandwidth: a kernel's fixed cost (launch gap, ramp, tail wave) plus its
// bytes at the bandwidth it reaches. bandwidth 0: not measured.
struct LinearCost {
  double fixed_s = 0;
  double bandwidth = 0;  // bytes/s
  bool measured() const { return bandwidth > 0; }
  double time(double bytes) const { return fixed_s + bytes / bandwidth; }
};

// Least squares of time = fixed + bytes / bandwidth over (bytes, seconds) points, each weighted by
// 1 / time^2 so small and large shapes count by their relative error. Needs two distinct byte counts;
// a negative fixed cost (noise) is clamped to 0 and the bandwidth refitted through the origin.
LinearCost fit_linear_cost(const std::vector<std::pair<double, double>>& bytes_seconds);

struct GemmBucket {
  int64_t m = 0;  // rows (tokens) of the activation
  LinearCost cost;
};

// Host work per decode step and stage assumed with measured speeds when none is given: a graph
// launch, the plan's host-to-device copies and the sampler's device-to-host sync, each of the order of
// 10-30 us. An estimate, not a measurement (doctor cannot see the engine's host loop); a `--trace` of a
// real run shows it as the gap between steps.
constexpr double kDefaultStepOverheadUs = 100.0;

struct DeviceProfile {
  std::string source;                    // the doctor JSON it came from; empty: nothing measured
  std::vector<GemmBucket> gemm_decode;   // ascending m; empty: ideal
  double gemm_prefill_flops = 0;         // FLOP/s of GemmRunner at m >= 2048; 0: ideal
  LinearCost attention_decode;           // paged decode attention, bytes = KV read
  double attention_prefill_flops = 0;    // FLOP/s of causal prefill attention; 0: ideal
  double graph_kernel_s = 0;             // one small kernel inside a CUDA graph; 0: not measured
  // Per decode step and stage, host work between graph launches (plan, H2D copies, the sampler's sync).
  // Not measurable by doctor; `plan --step-overhead-us` sets it.
  double step_overhead_s = 0;

  bool any() const {
    return !gemm_decode.empty() || gemm_prefill_flops > 0 || attention_decode.measured() ||
           attention_prefill_flops > 0 || graph_kernel_s > 0;
  }
  // Time of y[m, n] = x[m, k] w[n, k]^T: the bucket curves interpolated linearly in m (above the last
  // bucket its curve), never faster than flops / `peak_flops`. Requires gemm_decode.
  double gemm_time(double m, double n, double k, double ab_bytes, double out_bytes, double peak_flops) const;
};

// The "device" section of a doctor JSON (absent: an empty profile). `where` names the file in errors;
// every error names the key, e.g. "device.gemm_decode.buckets[1].bandwidth_gbps".
DeviceProfile device_profile_from_json(const nlohmann::json& doctor, const std::string& where);

// One line per input of the device model: what was measured (with its value) and what is ideal.
std::vector<std::string> describe_device_model(const DeviceProfile& p, double peak_flops, double peak_bandwidth);

}  // namespace conveyor
