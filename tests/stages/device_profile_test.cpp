// DeviceProfile: the doctor's curve fit recovers a known line, the JSON reader takes the fixture's every
// field, names the key in each error, reads a links-only (older) doctor JSON as "nothing measured", and
// the GEMM lookup interpolates between m buckets, takes a shape doctor timed as timed, and never beats the
// FLOP ceiling.
#include "stages/device_profile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <utility>

#include "runtime/core/error.h"
#include "stages/cpu_placement_probe.h"
#include "stages/cpu_quantum_probe.h"
#include "stages/cpu_ring_probe.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

nlohmann::json load(const std::string& name) {
  std::ifstream in(testing::data_path(name));
  return nlohmann::json::parse(in);
}

std::string error_of(const nlohmann::json& j) {
  try {
    device_profile_from_json(j, "d.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// doctor's FP8 linears (device.gemm_decode_fp8: buckets like gemm_decode's and the prefill rate) are read,
// described, and their errors name the FP8 section.
TEST(DeviceProfile, ReadsTheFp8Linears) {
  nlohmann::json j = load("doctor_measured.json");
  nlohmann::json fp8 = j.at("device").at("gemm_decode");
  for (auto& b : fp8.at("buckets")) b["bandwidth_gbps"] = b.at("bandwidth_gbps").get<double>() / 2;
  fp8["prefill_tflops"] = 1100;
  j["device"]["gemm_decode_fp8"] = fp8;
  const DeviceProfile p = device_profile_from_json(j, "d.json");
  ASSERT_EQ(p.gemm_decode_fp8.size(), p.gemm_decode.size());
  for (size_t i = 0; i < p.gemm_decode.size(); ++i) {
    EXPECT_EQ(p.gemm_decode_fp8[i].m, p.gemm_decode[i].m);
    EXPECT_DOUBLE_EQ(p.gemm_decode_fp8[i].cost.bandwidth, p.gemm_decode[i].cost.bandwidth / 2);
  }
  EXPECT_DOUBLE_EQ(p.gemm_prefill_fp8_flops, 1100e12);
  // At m = 16 (a bucket), 9 us + bytes / (4000 / 2 GB/s): the FP8 curve, not the bf16 one.
  const double bytes = (4096.0 * 4096 + 16 * 4096) * 1 + 16 * 4096 * 2;
  EXPECT_NEAR(p.gemm_time(16, 4096, 4096, 1, 2, 1e18, true), 5e-6 + bytes / 2000e9, 1e-12);
  bool line = false;
  for (const std::string& l : describe_device_model(p, 810e12, 4.28e12))
    line = line || l.rfind("  FP8 linears (quantize + e4m3 GEMM + scales): measured, per m: m=1 5.0 us + 2000 GB/s;", 0) == 0;
  EXPECT_TRUE(line);
  j["device"]["gemm_decode_fp8"].erase("prefill_tflops");
  EXPECT_NE(error_of(j).find("device.gemm_decode_fp8.prefill_tflops is missing"), std::string::npos) << error_of(j);
  j["device"]["gemm_decode_fp8"]["prefill_tflops"] = 1100;
  j["device"]["gemm_decode_fp8"]["buckets"][1]["bandwidth_gbps"] = -1;
  EXPECT_NE(error_of(j).find("device.gemm_decode_fp8.buckets[1].bandwidth_gbps"), std::string::npos) << error_of(j);
}

TEST(DeviceProfile, FitRecoversALine) {
  const std::vector<float> r = testing::random_floats(8, 11, 1e6f, 5e8f);
  std::vector<std::pair<double, double>> pts;
  for (float b : r) pts.emplace_back(b, 7e-6 + b / 3.1e12);
  const LinearCost c = fit_linear_cost(pts);
  EXPECT_NEAR(c.fixed_s, 7e-6, 1e-12);
  EXPECT_NEAR(c.bandwidth / 3.1e12, 1.0, 1e-9);
  // A line through below the origin is clamped to zero fixed cost.
  std::vector<std::pair<double, double>> neg;
  for (double b : {1e7, 5e7, 2e8, 4e8}) neg.emplace_back(b, b / 2e12 - 1e-6);
  const LinearCost through_origin = fit_linear_cost(neg);
  EXPECT_EQ(through_origin.fixed_s, 0.0);
  EXPECT_GT(through_origin.bandwidth, 2e12);  // every point is faster than 2 TB/s alone
  EXPECT_THROW(fit_linear_cost({{1e6, 1e-5}}), Error);
  EXPECT_THROW(fit_linear_cost({{1e6, 1e-5}, {1e6, 2e-5}}), Error);
}

TEST(DeviceProfile, ReadsEveryMeasuredPart) {
  const DeviceProfile p = device_profile_from_json(load("doctor_measured.json"), "doctor_measured.json");
  ASSERT_TRUE(p.any());
  EXPECT_EQ(p.source, "doctor_measured.json");
  ASSERT_EQ(p.gemm_decode.size(), 4u);
  const int64_t ms[] = {1, 16, 64, 256};
  const double fixed[] = {5, 5, 6, 8}, bw[] = {4000, 4000, 3600, 2800};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p.gemm_decode[i].m, ms[i]);
    EXPECT_DOUBLE_EQ(p.gemm_decode[i].cost.fixed_s, fixed[i] * 1e-6);
    EXPECT_DOUBLE_EQ(p.gemm_decode[i].cost.bandwidth, bw[i] * 1e9);
  }
  EXPECT_DOUBLE_EQ(p.gemm_prefill_flops, 700e12);
  EXPECT_DOUBLE_EQ(p.attention_decode.fixed_s, 10e-6);
  EXPECT_DOUBLE_EQ(p.attention_decode.bandwidth, 2500e9);
  EXPECT_DOUBLE_EQ(p.attention_decode_fp8.fixed_s, 12e-6);
  EXPECT_DOUBLE_EQ(p.attention_decode_fp8.bandwidth, 1800e9);
  EXPECT_DOUBLE_EQ(p.attention_prefill_flops, 50e12);
  EXPECT_DOUBLE_EQ(p.graph_kernel_s, 2e-6);
  EXPECT_EQ(p.step_overhead_s, 0.0);  // never from the JSON: the planner's parameter
  const std::vector<std::string> lines = describe_device_model(p, 810e12, 4.28e12);
  const std::string text = lines[0];
  EXPECT_NE(text.find("measured by conveyor doctor (doctor_measured.json)"), std::string::npos) << text;
  bool fp8_line = false;
  for (const std::string& l : lines) fp8_line = fp8_line || l == "  decode attention, FP8 cache: measured, 12.0 us + KV bytes / 1800 GB/s";
  EXPECT_TRUE(fp8_line);
}

TEST(DeviceProfile, ErrorsNameTheKey) {
  const nlohmann::json good = load("doctor_measured.json");
  nlohmann::json j = good;
  j["device"]["gemm_decode"]["buckets"][1].erase("bandwidth_gbps");
  EXPECT_NE(error_of(j).find("d.json: device.gemm_decode.buckets[1].bandwidth_gbps is missing"), std::string::npos)
      << error_of(j);
  j = good;
  j["device"]["gemm_prefill"]["tflops"] = -3;
  EXPECT_NE(error_of(j).find("device.gemm_prefill.tflops must be > 0, got -3"), std::string::npos) << error_of(j);
  j = good;
  j["device"]["attention_decode"]["fixed_us"] = "ten";
  EXPECT_NE(error_of(j).find("device.attention_decode.fixed_us must be a number >= 0, got \"ten\""), std::string::npos)
      << error_of(j);
  j = good;
  j["device"]["graph_kernel"]["us"] = nullptr;
  EXPECT_NE(error_of(j).find("device.graph_kernel.us must be a number, got null"), std::string::npos) << error_of(j);
  j = good;
  j["device"]["gemm_decode"]["buckets"][2]["m"] = 8;
  EXPECT_NE(error_of(j).find("device.gemm_decode.buckets[2].m = 8 must be larger than the bucket before it (16)"),
            std::string::npos)
      << error_of(j);
  j = good;
  j["device"]["gemm_decode"]["buckets"] = nlohmann::json::array();
  EXPECT_NE(error_of(j).find("device.gemm_decode.buckets must be a non-empty array"), std::string::npos) << error_of(j);
  j = good;
  j["device"]["attention_prefill"] = 5;
  EXPECT_NE(error_of(j).find("device.attention_prefill must be an object"), std::string::npos) << error_of(j);
}

TEST(DeviceProfile, OldDoctorJsonMeansIdeal) {
  const DeviceProfile none = device_profile_from_json(load("doctor_links_only.json"), "old.json");
  EXPECT_FALSE(none.any());
  EXPECT_TRUE(none.source.empty());
  const auto lines = describe_device_model(none, 810e12, 4.28e12);
  EXPECT_EQ(lines[0], "device model: ideal roofline (no doctor measurements): 810 TFLOP/s, 4.28 TB/s");
  // Only some parts measured: the rest are said to be ideal.
  nlohmann::json j = load("doctor_measured.json");
  j["device"].erase("gemm_decode");
  j["device"].erase("attention_prefill");
  const DeviceProfile part = device_profile_from_json(j, "part.json");
  EXPECT_TRUE(part.any());
  EXPECT_TRUE(part.gemm_decode.empty());
  EXPECT_EQ(part.attention_prefill_flops, 0.0);
  std::string all;
  for (const auto& l : describe_device_model(part, 810e12, 4.28e12)) all += l + "\n";
  EXPECT_NE(all.find("decode GEMMs: ideal (not measured)"), std::string::npos) << all;
  EXPECT_NE(all.find("prefill attention: ideal (not measured) 810.0 TFLOP/s"), std::string::npos) << all;
  EXPECT_NE(all.find("prefill GEMMs: measured 700.0 TFLOP/s"), std::string::npos) << all;
  EXPECT_NE(all.find("decode attention: measured, 10.0 us + KV bytes / 2500 GB/s"), std::string::npos) << all;
}

// doctor's stayer probe on a CPU host (stages/cpu_placement_probe.h): how well a CPU's run queue keeps
// its ranks, by the node's ranks; the simulator takes the entry for its node's ranks, else the nearest.
TEST(DeviceProfile, ReadsTheRunQueueStickiness) {
  nlohmann::json j = load("doctor_cpu.json");
  EXPECT_LT(device_profile_from_json(j, "cpu.json").sharing.sticky(3), 0);  // not measured
  j["device"]["sharing"]["stickiness"] = {{{"ranks", 3}, {"value", 1.0}}, {{"ranks", 4}, {"value", 0.25}}};
  const CoreSharing c = device_profile_from_json(j, "cpu.json").sharing;
  ASSERT_EQ(c.stickiness.size(), 2u);
  EXPECT_EQ(c.sticky(3), 1.0);
  EXPECT_EQ(c.sticky(4), 0.25);
  EXPECT_EQ(c.sticky(2), 1.0);  // the nearest measured
  EXPECT_EQ(c.sticky(9), 0.25);
  j["device"]["sharing"]["stickiness"][1]["value"] = 1.5;
  EXPECT_NE(error_of(j).find("device.sharing.stickiness entries must be {ranks, value in [0, 1]}"), std::string::npos)
      << error_of(j);
  j["device"]["sharing"]["stickiness"][1] = {{"ranks", 2}, {"value", 0.5}};
  EXPECT_NE(error_of(j).find("device.sharing.stickiness must be in ascending ranks"), std::string::npos) << error_of(j);
}

// The stayer probe's reading of its traces, on traces made by hand (ns; 2 CPUs): rank 0 computes
// throughout on CPU 0; ranks 1 and 2 compute 0-10 and 5-15 ms. Queued on CPU 1 together, the stayer is never
// doubled up and each phase is doubled up for all its crowded time: stickiness 1. When rank 2 spends half
// its crowded time beside the stayer and half beside rank 1, rank 1's phase is doubled up for half of it
// (f = 0.5, 1): var 1/16 over 0.75 x 0.25, stickiness 1/3.
TEST(DeviceProfile, StayerProbeReadsWhoSharesACpu) {
  auto trace = [](int64_t a, int64_t b, std::vector<std::pair<int64_t, int>> cpus) {
    PlacementTrace t;
    t.phases = {{a, b}};
    t.cpu_at = std::move(cpus);
    return t;
  };
  const int64_t ms = 1000000;
  const PlacementTrace stayer = trace(0, 20 * ms, {{0, 0}});
  std::vector<PlacementTrace> kept = {stayer, trace(0, 10 * ms, {{0, 1}}), trace(5 * ms, 15 * ms, {{5 * ms, 1}})};
  const StayerStats k = stayer_stats(kept, 2, 0, 20 * ms, ms / 10);
  EXPECT_NEAR(k.crowded_s, 5e-3, 1e-9);
  EXPECT_EQ(k.doubled_s, 0.0);
  EXPECT_EQ(k.share(), 0.0);
  EXPECT_EQ(k.phases, 2);
  EXPECT_EQ(k.stickiness, 1.0);
  EXPECT_EQ(k.moves, 0);
  std::vector<PlacementTrace> mixed = kept;
  mixed[2].cpu_at = {{5 * ms, 0}, {7500000, 1}};  // beside the stayer, then beside rank 1
  const StayerStats m = stayer_stats(mixed, 2, 0, 20 * ms, ms / 10);
  EXPECT_NEAR(m.share(), 0.5, 0.02);
  EXPECT_EQ(m.moves, 1);
  EXPECT_NEAR(m.stickiness, 1.0 / 3, 0.02);
}

// doctor's ring probe (stages/cpu_ring_probe.h): the speeds a pipeline of `ranks` ranks meets replace
// speed(k) only for that many ranks, and only beyond the CPUs (a k the ring never met, 0, keeps speed(k));
// the hop probe's samples, in seconds.
TEST(DeviceProfile, ReadsThePipelineSpeeds) {
  nlohmann::json j = load("doctor_cpu.json");
  j["device"]["sharing"]["cpus"] = 2;
  j["device"]["sharing"]["speed"] = {1.0, 0.9, 0.6, 0.45};
  j["device"]["sharing"]["pipeline_speed"] = {{{"ranks", 2}, {"speed", {0.8, 0.8}}},
                                              {{"ranks", 3}, {"speed", {0.0, 0.85, 0.58}}}};
  const CoreSharing c = device_profile_from_json(j, "cpu.json").sharing;
  ASSERT_EQ(c.pipeline_speed.size(), 2u);
  EXPECT_EQ(c.in_pipeline(3).speed, (std::vector<double>{1.0, 0.85, 0.58, 0.45}));
  EXPECT_EQ(c.in_pipeline(2).speed, c.speed);  // a CPU each: not replaced
  EXPECT_EQ(c.in_pipeline(4).speed, c.speed);  // not measured with 4
  j["device"]["sharing"]["busy_hop_samples_us"] = {1000.0, 3000.0};
  EXPECT_EQ(device_profile_from_json(j, "cpu.json").sharing.busy_hop_samples_s, (std::vector<double>{1e-3, 3e-3}));
  j["device"]["sharing"]["busy_hop_samples_us"] = {-1.0};
  EXPECT_NE(error_of(j).find("device.sharing.busy_hop_samples_us must be an array of numbers >= 0"), std::string::npos)
      << error_of(j);
  j["device"]["sharing"].erase("busy_hop_samples_us");
  j["device"]["sharing"]["pipeline_speed"][1]["speed"] = {0.9, 0.6};
  EXPECT_NE(error_of(j).find("device.sharing.pipeline_speed entries must be {ranks, speed: ranks numbers in [0, 1.5]}"),
            std::string::npos)
      << error_of(j);
}

// The ring probe's reading of its traces, made by hand (ns): rank 0 computes 0-4 ms in two calls of 2 ms,
// alone for the first and beside rank 1 (2-6 ms: calls of 1 and 3 ms) for the second; rank 1's second
// call is alone (k at its midpoint). With a solo call of 1 ms, speed(1) = 2 calls x 1 ms / (2 + 3) ms and
// speed(2) = 2 x 1 ms / (2 + 1) ms; calls starting before `from` are left out.
TEST(DeviceProfile, RingProbeReadsSpeedByRanksComputing) {
  const int64_t ms = 1000000;
  RingTrace a, b;
  a.phases = {{0, 4 * ms}};
  a.call_ends = {2 * ms, 4 * ms};
  b.phases = {{2 * ms, 6 * ms}};
  b.call_ends = {3 * ms, 6 * ms};
  RingSpeed r;
  r.add({a, b}, 0);
  EXPECT_EQ(r.calls, (std::vector<double>{2, 2}));
  const std::vector<double> s = r.speed(1e-3);
  EXPECT_NEAR(s[0], 2.0 / 5.0, 1e-9);
  EXPECT_NEAR(s[1], 2.0 / 3.0, 1e-9);
  RingSpeed late;
  late.add({a, b}, 3 * ms);  // only rank 1's second call starts that late
  EXPECT_EQ(late.calls, (std::vector<double>{1, 0}));
  EXPECT_EQ(late.speed(1e-3)[1], 0.0);  // never met: 0
  // Doctor counts a ring's k only from enough calls (a few are one moment of the host): 2 calls are too few for 3.
  EXPECT_EQ(r.speed(1e-3, 3), (std::vector<double>{0, 0}));
  EXPECT_NEAR(r.speed(1e-3, 2)[0], 2.0 / 5.0, 1e-9);
  // Doctor takes per k the median of three rings' speeds (one slowed by the host does not move it).
  EXPECT_EQ(median_speed({{0.8, 0.6, 0.45}, {0.6, 0.4, 0.3}, {0.82, 0.62, 0}}), (std::vector<double>{0.8, 0.6, 0.375}));
  EXPECT_EQ(median_speed({{0.5, 0}, {0.7, 0}}), (std::vector<double>{0.6, 0.0}));
  // A k no ring met often enough alone is read from the rings' calls together, where they are enough.
  RingSpeed pooled;
  pooled.merge(r);
  pooled.merge(late);
  EXPECT_EQ(pooled.calls, (std::vector<double>{3, 2}));
  EXPECT_NEAR(pooled.speed(1e-3, 3)[0], 3.0 / 8.0, 1e-9);  // 3 calls of 1 ms alone took 2 + 3 + 3 ms
  EXPECT_EQ(pooled.speed(1e-3, 3)[1], 0.0);               // 2 calls: too few
  EXPECT_EQ(median_speed({{0, 0.6}, {0, 0.5}}, {0.9, 0.2}), (std::vector<double>{0.9, 0.55}));
}

// Doctor's quantum probe (stages/cpu_quantum_probe.h): a shared CPU's turns in a thread's clock stamps, the
// runs cut by the window left out; and the simulator reads the slice as quantum_us (0 without it).
TEST(DeviceProfile, QuantumProbeReadsTurnsAndTheSliceIsRead) {
  const int64_t us = 1000;
  std::vector<int64_t> stamps;  // every 2 us through runs of 0-1, 2-6, 7-10 and 12-15 ms (gaps of 1-2 ms)
  for (const auto& [from, to] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {2, 6}, {7, 10}, {12, 15}})
    for (int64_t t = from * 1000 * us; t < to * 1000 * us; t += 2 * us) stamps.push_back(t);
  const std::vector<double> runs = interior_runs(stamps, 50 * us);
  ASSERT_EQ(runs.size(), 2u);  // the first (0-1 ms) and the last (12-15 ms) are cut by the window
  EXPECT_NEAR(runs[0], 3.998e-3, 1e-9);
  EXPECT_NEAR(runs[1], 2.998e-3, 1e-9);
  EXPECT_TRUE(interior_runs({1, 2, 3}, 50 * us).empty());  // never descheduled: no whole turn
  nlohmann::json j = load("doctor_cpu.json");
  EXPECT_EQ(device_profile_from_json(j, "cpu.json").sharing.quantum_s, 0.0);
  j["device"]["sharing"]["quantum_us"] = 4000;
  EXPECT_DOUBLE_EQ(device_profile_from_json(j, "cpu.json").sharing.quantum_s, 4e-3);
  j["device"]["sharing"]["quantum_us"] = -1;
  EXPECT_NE(error_of(j).find("device.sharing.quantum_us must be a number >= 0"), std::string::npos) << error_of(j);
}

// The CPU backend's doctor (stages/cpu_probe.h): dtype, ceilings, unpadded rows, the sampler, the small

// doctor's TP probe on a CPU host (stages/cpu_probe.h): the slice a rank that never waits keeps a CPU for,
// and the holds of co-runners that are TP ranks themselves, interpolated by their turn from (0, 0).
TEST(DeviceProfile, ReadsTheTpHolds) {
  nlohmann::json j = load("doctor_cpu.json");
  j["device"]["sharing"]["slice_us"] = 16000;
  j["device"]["sharing"]["holds"] = {{{"turn_us", 1500}, {"hold_us", 1500}}, {{"turn_us", 6000}, {"hold_us", 5000}},
                                     {{"turn_us", 12000}, {"hold_us", 8000}}};
  const CoreSharing c = device_profile_from_json(j, "cpu.json").sharing;
  EXPECT_DOUBLE_EQ(c.slice_s, 16e-3);
  ASSERT_EQ(c.holds.size(), 3u);
  EXPECT_DOUBLE_EQ(c.hold(0), 16e-3);          // no all-reduces: never yields before the slice
  EXPECT_DOUBLE_EQ(c.hold(0.75e-3), 0.75e-3);  // below the first point, from (0, 0)
  EXPECT_DOUBLE_EQ(c.hold(9e-3), 6.5e-3);
  EXPECT_DOUBLE_EQ(c.hold(40e-3), 8e-3);       // beyond the last, its hold
  CoreSharing plain = c;
  plain.holds.clear();
  EXPECT_DOUBLE_EQ(plain.hold(9e-3), 9e-3);  // without holds: min(turn, slice)
  EXPECT_DOUBLE_EQ(plain.hold(40e-3), 16e-3);
  j["device"]["sharing"]["holds"][1]["turn_us"] = 1000;
  EXPECT_NE(error_of(j).find("device.sharing.holds must be in ascending turn_us"), std::string::npos) << error_of(j);
}
// ops, the host's work per step and how ranks share the cores, each key named in its error.
TEST(DeviceProfile, ReadsTheCpuParts) {
  const nlohmann::json good = load("doctor_cpu.json");
  const DeviceProfile p = device_profile_from_json(good, "cpu.json");
  EXPECT_EQ(p.dtype_bytes, 4);
  EXPECT_FALSE(p.padded_rows);
  std::string lines;  // a CPU's speeds read in GFLOP/s, not as "0.0 TFLOP/s"
  for (const auto& l : describe_device_model(p, p.ceiling_flops, p.ceiling_bandwidth)) lines += l + "\n";
  EXPECT_EQ(lines.find("0.0 TFLOP/s"), std::string::npos) << lines;
  EXPECT_NE(lines.find(" GFLOP/s"), std::string::npos) << lines;
  EXPECT_DOUBLE_EQ(p.ceiling_flops, 0.02e12);
  EXPECT_DOUBLE_EQ(p.ceiling_bandwidth, 12e9);
  EXPECT_DOUBLE_EQ(p.small_ops.fixed_s, 0.5e-6);
  EXPECT_DOUBLE_EQ(p.small_ops.bandwidth, 20e9);
  EXPECT_DOUBLE_EQ(p.sampling.time(4.0 * 8192), 3e-6 + 4.0 * 8192 / 4e9);
  EXPECT_DOUBLE_EQ(p.measured_step_overhead_s, 40e-6);
  EXPECT_EQ(p.step_overhead_s, 0.0);  // the planner's parameter, which the measured value feeds
  EXPECT_EQ(p.sharing.cpus, 2);
  EXPECT_DOUBLE_EQ(p.sharing.at(1), 1.0);
  EXPECT_DOUBLE_EQ(p.sharing.at(3), 0.6);
  EXPECT_DOUBLE_EQ(p.sharing.at(8), 0.45 * 4 / 8);  // beyond the measured ranks: time-sliced
  EXPECT_DOUBLE_EQ(CoreSharing{}.at(5), 1.0);       // GPUs: ranks never share
  const DeviceProfile gpu = device_profile_from_json(load("doctor_measured.json"), "d.json");
  EXPECT_TRUE(gpu.padded_rows);
  EXPECT_EQ(gpu.dtype_bytes, 2);  // the GPU doctor writes "dtype": "bf16"
  EXPECT_FALSE(gpu.sharing.any());
  nlohmann::json j = good;
  j["device"]["sharing"]["speed"][2] = 0;
  EXPECT_NE(error_of(j).find("device.sharing.speed entries must be numbers in (0, 1.5], got 0"), std::string::npos)
      << error_of(j);
  j = good;
  j["device"]["dtype"] = "int4";
  EXPECT_NE(error_of(j).find("device.dtype must be fp32, bf16 or fp16, got int4"), std::string::npos) << error_of(j);
  j = good;
  j["device"]["sampling"].erase("bandwidth_gbps");
  EXPECT_NE(error_of(j).find("device.sampling.bandwidth_gbps is missing"), std::string::npos) << error_of(j);
  j = good;
  j["device"]["step_overhead"]["us"] = -1;
  EXPECT_NE(error_of(j).find("device.step_overhead.us must be a number >= 0"), std::string::npos) << error_of(j);
}

TEST(DeviceProfile, GemmTimeInterpolatesBetweenBuckets) {
  const DeviceProfile p = device_profile_from_json(load("doctor_measured.json"), "d.json");
  const double n = 4096, k = 4096;
  auto bytes = [&](double m) { return (n * k + m * k) * 2 + m * n * 2; };
  EXPECT_NEAR(p.gemm_time(1, n, k, 2, 2, 700e12), 5e-6 + bytes(1) / 4000e9, 1e-15);
  // m = 40: halfway between the 16 and 64 buckets, each curve at m = 40's bytes.
  const double at16 = 5e-6 + bytes(40) / 4000e9, at64 = 6e-6 + bytes(40) / 3600e9;
  EXPECT_NEAR(p.gemm_time(40, n, k, 2, 2, 700e12), 0.5 * at16 + 0.5 * at64, 1e-15);
  // Above the last bucket its curve, but never faster than the FLOPs at the given peak.
  EXPECT_NEAR(p.gemm_time(300, n, k, 2, 2, 700e12), 8e-6 + bytes(300) / 2800e9, 1e-15);
  EXPECT_NEAR(p.gemm_time(4096, n, k, 2, 2, 700e12), 2.0 * 4096 * n * k / 700e12, 1e-15);
}

// A shape doctor timed at a bucket's m (the bucket's points) takes its own time there (at other bytes, the
// fit's slope from it) and in the interpolation between buckets; other shapes take the fit; a point without
// its time is an error naming it.
TEST(DeviceProfile, GemmTimeTakesATimedShapeAsTimed) {
  nlohmann::json j = load("doctor_measured.json");
  const double k = 4096;
  auto bytes = [&](double m, double n) { return (n * k + m * k) * 2 + m * n * 2; };
  j["device"]["gemm_decode"]["buckets"][0]["points"] = {
      {{"n", 4096}, {"k", 4096}, {"bytes", bytes(1, 4096)}, {"time_us", 9.0}}};
  const DeviceProfile p = device_profile_from_json(j, "d.json");
  EXPECT_NEAR(p.gemm_time(1, 4096, k, 2, 2, 700e12), 9e-6, 1e-15);
  EXPECT_NEAR(p.gemm_time(1, 4096, k, 2, 4, 700e12), 9e-6 + 4096 * 2 / 4000e9, 1e-15);  // fp32 y: 8 KB more
  EXPECT_NEAR(p.gemm_time(1, 1024, k, 2, 2, 700e12), 5e-6 + bytes(1, 1024) / 4000e9, 1e-15);
  // m = 6: a third of the way from the m = 1 bucket (timed, at m = 6's bytes) to the m = 16 one (its fit there),
  // as every bucket is read at m's bytes.
  const double timed = 9e-6 + (bytes(6, 4096) - bytes(1, 4096)) / 4000e9, fit16 = 5e-6 + bytes(6, 4096) / 4000e9;
  EXPECT_NEAR(p.gemm_time(6, 4096, k, 2, 2, 700e12), 2.0 / 3 * timed + 1.0 / 3 * fit16, 1e-15);
  j["device"]["gemm_decode"]["buckets"][0]["points"][0].erase("time_us");
  EXPECT_NE(error_of(j).find("device.gemm_decode.buckets[0].points[0].time_us is missing"), std::string::npos)
      << error_of(j);
}

}  // namespace
}  // namespace conveyor
