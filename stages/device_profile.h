// The planner's measured inputs: component speeds `conveyor doctor --output-json` writes under "device"
// (GEMM per decode m bucket, prefill GEMM, paged decode/prefill attention, a kernel inside a CUDA graph;
// on the CPU backend also its dtype, peaks, sampler, small ops and how ranks share the host's cores)
// and link costs under "edges"/"tensor_groups". Every part is optional: a missing one leaves the ideal
// roofline for that part, and describe_device_model() says which parts were measured and which not.
#pragma once

#include <array>
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

// One shape doctor timed in a bucket (y[m, n] = x[m, k] w[n, k]^T) as what the bucket's fit misses for it:
// its measured time less the fit's at its bytes.
struct GemmShapeTime {
  double n = 0, k = 0, residual_s = 0;
};

struct GemmBucket {
  int64_t m = 0;  // rows (tokens) of the activation
  LinearCost cost;
  double row_s = 0;  // per output feature n (a CPU kernel's per-row reductions and stores); 0 on GPUs
  std::vector<GemmShapeTime> shapes;  // the bucket's timed shapes (doctor JSON's points), if it lists them
  double time(double bytes, double n) const { return cost.time(bytes) + row_s * n; }
  // The fit's time plus, where doctor timed this (n, k) at this m, what the fit missed there (so the shape's
  // measured time at doctor's bytes, and the fit's slope for other output dtypes): a fit over shapes of several
  // k misses what one k costs (on a CPU host k = 512 rows stream ~15% slower per byte at m = 1 than k = 256
  // or 1,024 ones, and those are a small model's q|k|v and gate|up).
  double time(double bytes, double n, double k) const;
};

// Least squares of time = fixed + bytes / bandwidth + n * row over (bytes, n, seconds) points, weighted
// by 1 / time^2; a negative part (noise) is dropped and the rest refitted. Needs two distinct shapes.
GemmBucket fit_gemm_cost(int64_t m, const std::vector<std::array<double, 3>>& bytes_n_seconds);

// Host work per decode step and stage assumed with measured speeds when none is given: a graph
// launch, the plan's host-to-device copies and the sampler's device-to-host sync, each of the order of
// 10-30 us. An estimate, not a measurement (doctor cannot see the engine's host loop); a `--trace` of a
// real run shows it as the gap between steps.
constexpr double kDefaultStepOverheadUs = 100.0;

// How fast one rank computes while k ranks of its node compute at once (CPU ranks share cores and
// memory bandwidth), measured for k = 1 .. the ranks doctor ran with. Empty: ranks never share (GPUs).
struct CoreSharing {
  int cpus = 0;               // the node's CPUs, as doctor saw them
  std::vector<double> speed;  // speed[k - 1]: a rank's speed with k ranks computing / its speed alone
  // A waiting rank woken by a pipeline message (plan, hidden states, result) takes it this long after
  // it was sent: hop_s while the node has a free core, busy_hop_s while its cores are all computing.
  double hop_s = 0, busy_hop_s = 0;
  // Each of doctor's hops (seconds), idle and busy: the simulator draws a hop from them where measured, as
  // a pipeline's hops spread, which keeps its stages out of step. Empty: every hop takes the mean.
  std::vector<double> hop_samples_s, busy_hop_samples_s;
  // While more ranks compute than the node has CPUs, a rank waiting in a TP all-reduce yields its CPU
  // (MPI's progress loop when oversubscribed) and a co-runner keeps it up to this long: the scheduler's
  // slice as a TP pair meets it (cpu_probe's yield probe). 0: not measured, plain processor sharing.
  double slice_s = 0;
  // The scheduler's slice between ranks that share one CPU and never wait (doctor's quantum probe): the
  // simulated run queues give a shared CPU to its ranks in turns of this long (stages/sim/cpu_run_queues.h).
  // 0: not measured, the queued ranks share their CPU at once.
  double quantum_s = 0;
  // How long a co-runner that is itself a TP rank keeps that CPU, by its own turn (solo seconds of work
  // between its all-reduces), ascending turns: (turn, hold). Empty: min(turn, slice_s).
  std::vector<std::pair<double, double>> holds;
  // How well a CPU's run queue keeps its ranks through a task while more ranks compute than there are
  // CPUs, by the node's ranks (cpu_placement_probe's stickiness, 0..1): (ranks, stickiness), ascending
  // ranks. The simulator's per-CPU run queues (stages/sim/cpu_run_queues.h) weigh their speeds by it
  // against processor sharing. Empty: not measured, processor sharing for TP-less ranks.
  std::vector<std::pair<int, double>> stickiness;
  // The stickiness measured with `ranks` ranks on the node, else the nearest measured; < 0: none measured.
  double sticky(int ranks) const;
  // A rank's speed with k ranks computing as a pipeline of `ranks` ranks on the node meets it (cpu_ring_probe:
  // ranks that wake and nap, CPUs left idle beside doubled ones), by ranks, ascending: (ranks, speed[k - 1]).
  // Empty: not measured, `speed` (ranks that compute without pause) for pipelines too.
  std::vector<std::pair<int, std::vector<double>>> pipeline_speed;
  // The most a pipeline_speed reading may be: above it, the solo rate it is read against was slowed, not
  // the pipeline fast (doctor drops such a ring, the profile reader refuses such a file).
  static constexpr double kMaxPipelineSpeed = 1.5;
  // This sharing with `speed` as a pipeline of `ranks` ranks meets it where the ring probe measured that
  // many ranks, more than the CPUs (a k the ring never met keeps speed(k)); else itself.
  CoreSharing in_pipeline(int ranks) const;
  // hold(turn): interpolated in `holds` from (0, 0), the last hold beyond the last turn, never above
  // slice_s; turn 0 (no all-reduces): slice_s.
  double hold(double turn) const;
  bool any() const { return !speed.empty(); }
  // Beyond the measured k, the cores are time-sliced: speed(last) * last / k.
  double at(int k) const;
};

struct DeviceProfile {
  std::string source;                    // the doctor JSON it came from; empty: nothing measured
  int dtype_bytes = 0;                   // device.dtype: 4 for fp32 (the CPU backend); 0: not said (bf16)
  bool padded_rows = true;               // decode rows padded to the CUDA graph buckets; false on CPUs
  double ceiling_flops = 0;              // device.tflops: the compute ceiling; 0: the preset's
  double ceiling_bandwidth = 0;          // device.bandwidth_gbps: the memory ceiling; 0: the preset's
  std::vector<GemmBucket> gemm_decode;   // ascending m; empty: ideal
  double gemm_prefill_flops = 0;         // FLOP/s of GemmRunner at m >= 2048; 0: ideal
  // An FP8 linear as the runtime runs it (per-token quantize, cuBLASLt e4m3 with its scales fused or fp32 +
  // epilogue, whichever is faster), bytes counted as gemm_time does with one-byte weights and x; empty / 0:
  // not measured (the bf16 curves over the FP8 bytes, and the bf16 prefill rate scaled to the FP8 peak).
  std::vector<GemmBucket> gemm_decode_fp8;
  double gemm_prefill_fp8_flops = 0;
  LinearCost attention_decode;           // paged decode attention, bytes = KV read
  LinearCost attention_decode_fp8;       // the same over an FP8 (e4m3) cache, bytes = the codes read; not
                                         // measured: attention_decode's line is used for FP8 bytes too
  double attention_prefill_flops = 0;    // FLOP/s of causal prefill attention; 0: ideal
  double graph_kernel_s = 0;             // one small kernel inside a CUDA graph; 0: not measured
  LinearCost small_ops;                  // CPU: one small op (norm, rope, SiLU, add) = fixed + bytes / bandwidth
  LinearCost sampling;                   // per sampled row: fixed + fp32 logit bytes / bandwidth
  CoreSharing sharing;
  double measured_step_overhead_s = -1;  // device.step_overhead.us when doctor measured it; < 0: not
  // Per decode step and stage, host work between graph launches (plan, H2D copies, the sampler's sync).
  // Not measurable by doctor; `plan --step-overhead-us` sets it.
  double step_overhead_s = 0;

  bool any() const {
    return !gemm_decode.empty() || gemm_prefill_flops > 0 || attention_decode.measured() || attention_decode_fp8.measured() ||
           attention_prefill_flops > 0 || graph_kernel_s > 0 || small_ops.measured() || sampling.measured() ||
           !gemm_decode_fp8.empty();
  }
  // Time of y[m, n] = x[m, k] w[n, k]^T: the bucket curves (gemm_decode, or gemm_decode_fp8 when `fp8`)
  // interpolated linearly in m (above the last bucket its curve), never faster than flops / `peak_flops`.
  // Requires those buckets.
  double gemm_time(double m, double n, double k, double ab_bytes, double out_bytes, double peak_flops,
                   bool fp8 = false) const;
};

// The "device" section of a doctor JSON (absent: an empty profile). `where` names the file in errors;
// every error names the key, e.g. "device.gemm_decode.buckets[1].bandwidth_gbps".
DeviceProfile device_profile_from_json(const nlohmann::json& doctor, const std::string& where);

// One line per input of the device model: what was measured (with its value) and what is ideal.
std::vector<std::string> describe_device_model(const DeviceProfile& p, double peak_flops, double peak_bandwidth);

}  // namespace conveyor
