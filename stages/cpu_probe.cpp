// CPU device measurements for `conveyor doctor` (see stages/cpu_probe.h). Inputs are random; GEMM weights
// rotate over a pool four times the L3 of common hosts so every call streams them from memory, as a decode
// step does (a stage's weights are far larger than the caches). Timings are medians of samples of
// back-to-back calls on the steady clock after a warm-up call.
#include "stages/cpu_probe.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "runtime/core/error.h"
#include "runtime/engine/scheduler.h"
#include "runtime/engine/step_plan.h"
#include "runtime/sampling/sampler.h"
#include "stages/cpu_ceilings.h"
#include "stages/device_profile.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kPoolFloats = size_t(32) << 20;  // 128 MiB of weights
constexpr int kSamples = 7;
constexpr double kSampleSeconds = 2e-3;  // calls per sample: enough for ~2 ms

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Median seconds of one call of fn(i): three untimed calls (the fastest sizes the samples), then
// kSamples samples of enough calls for kSampleSeconds each (i counts calls, for rotating buffers).
template <typename Fn>
double median_s(Fn&& fn) {
  int i = 0;
  double once = 1e30;
  for (int k = 0; k < 3; ++k) {
    const auto t = Clock::now();
    fn(i++);
    once = std::min(once, std::max(seconds_since(t), 1e-7));
  }
  const int calls = std::max(1, static_cast<int>(kSampleSeconds / once));
  std::vector<double> s;
  for (int k = 0; k < kSamples; ++k) {
    const auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) fn(i++);
    s.push_back(seconds_since(t0) / calls);
  }
  std::nth_element(s.begin(), s.begin() + kSamples / 2, s.end());
  return s[kSamples / 2];
}

// fit_linear_cost, or on a host so loaded that the points do not grow with their bytes, the plain
// average speed (no fixed part): a measurement is still written, and its points show the noise.
LinearCost fit_or_average(const std::vector<std::pair<double, double>>& pts) {
  try {
    return fit_linear_cost(pts);
  } catch (const Error&) {
    double bytes = 0, secs = 0;
    for (const auto& [b, t] : pts) bytes += b, secs += t;
    return LinearCost{0, bytes / secs};
  }
}

// y[m, n] = x[m, k] w[n, k]^T with w taken in turn from a 128 MiB pool.
struct GemmBench {
  std::vector<float> pool = random_floats(kPoolFloats, 17);
  std::vector<float> x = random_floats(size_t(256) * 4096, 3);
  std::vector<float> y = std::vector<float>(size_t(256) * 8192);
  double time(int m, int n, int k) {
    const size_t w = size_t(n) * k, copies = std::max<size_t>(1, kPoolFloats / w);
    return median_s([&](int i) { matmul_ref(y.data(), x.data(), pool.data() + (size_t(i) % copies) * w, nullptr, m, n, k); });
  }
};

// (n, k) of small models' projections, 2 to 16 MiB of fp32 weights each.
const std::vector<std::pair<int, int>>& gemm_shapes() {
  static const std::vector<std::pair<int, int>> s = {{1024, 512}, {3072, 512}, {512, 1536}, {2048, 1024}, {4096, 1024}};
  return s;
}

// The m = 256 bucket (prefill chunks and large decode batches) takes the three smaller shapes only: its
// FLOPs dominate the doctor's time. Its rate is also the prefill GEMM speed (the planner's ceiling).
nlohmann::json gemm_sections(GemmBench& b) {
  nlohmann::json buckets = nlohmann::json::array();
  double flops = 0, secs = 0;
  for (int m : {1, 4, 16, 64, 256}) {
    nlohmann::json points = nlohmann::json::array();
    std::vector<std::pair<double, double>> fit;
    for (const auto& [n, k] : gemm_shapes()) {
      if (m == 256 && double(n) * k > 1.6e6) continue;
      const double t = b.time(m, n, k), bytes = 4.0 * (double(n) * k + double(m) * k + double(m) * n);
      points.push_back({{"n", n}, {"k", k}, {"bytes", bytes}, {"time_us", t * 1e6}, {"gbps", bytes / t / 1e9}});
      fit.emplace_back(bytes, t);
      if (m == 256) flops += 2.0 * m * n * k, secs += t;
    }
    const LinearCost c = fit_or_average(fit);
    buckets.push_back({{"m", m}, {"fixed_us", c.fixed_s * 1e6}, {"bandwidth_gbps", c.bandwidth / 1e9}, {"points", points}});
  }
  return {{"gemm_decode",
           {{"method", "matmul_ref, fp32, y = x w^T for m in {1, 4, 16, 64, 256} x 5 (n, k) of small models (2-16 MiB "
                       "of weights; m = 256 the three up to 6 MiB); weights rotate over 128 MiB (no cache hits); median "
                       "of 7 samples of ~2 ms; per m a least-squares fit (weights 1/t^2) of time = fixed + bytes / "
                       "bandwidth, bytes = weights + x + y"},
            {"buckets", buckets}}},
          {"gemm_prefill", {{"method", "the m = 256 bucket: its FLOPs / its time"}, {"tflops", flops / secs / 1e12}}}};
}

// Seconds of paged_attention_ref for `batch` sequences with `history` cached and `fresh` new tokens,
// 8 query / 4 KV heads of 64 (a small model's), blocks of 16 scattered over the pool.
double attention_time(int batch, int history, int fresh) {
  constexpr int kHeads = 8, kKvHeads = 4, kHeadDim = 64, kBlock = 16;
  const int ctx = history + fresh, per_seq = (ctx + kBlock - 1) / kBlock;
  const PagedKvShape shape{batch * per_seq, kBlock, kKvHeads, kHeadDim};
  std::vector<int32_t> ids(static_cast<size_t>(shape.num_blocks)), starts{0}, positions;
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
  for (int s = 0; s < batch; ++s) {
    for (int p = history; p < ctx; ++p) positions.push_back(p);
    starts.push_back(starts.back() + fresh);
  }
  const size_t act = size_t(starts.back()) * kHeads * kHeadDim;
  const std::vector<float> kc = random_floats(shape.layer_elems(), 1), vc = random_floats(shape.layer_elems(), 2);
  const std::vector<float> q = random_floats(act, 3);
  std::vector<float> out(act);
  AttentionBatch b;
  b.num_seqs = batch;
  b.query_start = starts.data();
  b.positions = positions.data();
  b.block_tables = ids.data();
  b.max_blocks_per_seq = per_seq;
  const AttentionParams p{kHeads, 1.f / std::sqrt(float(kHeadDim)), 0};
  return median_s([&](int) { paged_attention_ref(out.data(), q.data(), kc.data(), vc.data(), b, shape, p); });
}

nlohmann::json attention_sections() {
  constexpr double kKvBytesPerPos = 2.0 * 4 * 64 * 4;  // K and V, 4 KV heads of 64, fp32
  nlohmann::json points = nlohmann::json::array();
  std::vector<std::pair<double, double>> fit;
  for (int batch : {1, 16})
    for (int ctx : {64, 512}) {
      const double t = attention_time(batch, ctx - 1, 1), bytes = batch * ctx * kKvBytesPerPos;
      points.push_back({{"batch", batch}, {"context", ctx}, {"bytes", bytes}, {"time_us", t * 1e6}, {"gbps", bytes / t / 1e9}});
      fit.emplace_back(bytes, t);
    }
  const LinearCost c = fit_or_average(fit);
  nlohmann::json prefill = nlohmann::json::array();
  double flops = 0, secs = 0;
  for (const auto& [history, fresh] : std::vector<std::pair<int, int>>{{0, 256}, {384, 128}}) {
    const double t = attention_time(1, history, fresh);
    double pairs = 0;
    for (int i = 0; i < fresh; ++i) pairs += history + i + 1;
    const double f = 4.0 * pairs * 8 * 64;
    prefill.push_back({{"history", history}, {"new", fresh}, {"time_us", t * 1e6}, {"tflops", f / t / 1e12}});
    flops += f, secs += t;
  }
  return {{"attention_decode",
           {{"method", "paged_attention_ref, fp32, 8 query / 4 KV heads of 64, block 16 scattered, one new token per "
                       "sequence, batch {1, 16} x context {64, 512}; median of 7 samples; fit (weights 1/t^2) of "
                       "time = fixed + KV bytes / bandwidth"},
            {"fixed_us", c.fixed_s * 1e6}, {"bandwidth_gbps", c.bandwidth / 1e9}, {"points", points}}},
          {"attention_prefill",
           {{"method", "paged_attention_ref, one sequence: 256 new tokens, and 128 after 384 cached; causal FLOPs "
                       "4 * heads * head_dim per (query, visible key); tflops = all FLOPs / all time"},
            {"tflops", flops / secs / 1e12}, {"points", prefill}}}};
}

// The greedy sampler (runtime/sampling) on one row of random logits: time = fixed + logit bytes / bandwidth.
nlohmann::json sampling_section() {
  Sampler sampler({2});
  SamplingParams params;
  params.temperature = 0;
  const std::vector<int32_t> none;
  nlohmann::json points = nlohmann::json::array();
  std::vector<std::pair<double, double>> fit;
  for (int vocab : {8192, 65536}) {
    const std::vector<float> logits = random_floats(static_cast<size_t>(vocab), 9);
    const double t = median_s([&](int) { sampler.sample(logits.data(), vocab, SequenceView{none, none, 1}, params); });
    points.push_back({{"vocab", vocab}, {"time_us", t * 1e6}});
    fit.emplace_back(4.0 * vocab, t);
  }
  const LinearCost c = fit_or_average(fit);
  return {{"method", "Sampler::sample, greedy, one row of random fp32 logits, vocab {8192, 65536}; fit of time = "
                     "fixed + logit bytes / bandwidth"},
          {"fixed_us", c.fixed_s * 1e6}, {"bandwidth_gbps", c.bandwidth / 1e9}, {"points", points}};
}

// rms_norm_ref over rows x 1024: the small ops' fixed cost and the bandwidth they reach on activations
// (a decode step's activations stay in the caches).
nlohmann::json small_ops_section() {
  constexpr int kCols = 1024;
  const std::vector<float> x = random_floats(size_t(64) * kCols, 4), w = random_floats(kCols, 5);
  std::vector<float> out(x.size());
  std::vector<std::pair<double, double>> fit;
  for (int rows : {1, 64}) {
    const double t = median_s([&](int) { rms_norm_ref(out.data(), x.data(), w.data(), rows, kCols, 1e-5f); });
    fit.emplace_back(4.0 * (2.0 * rows * kCols + kCols), t);
  }
  const LinearCost c = fit_or_average(fit);
  return {{"method", "rms_norm_ref over {1, 64} x 1024 fp32 (read x and w, write out); fit of time = fixed + bytes / "
                     "bandwidth"},
          {"fixed_us", c.fixed_s * 1e6}, {"bandwidth_gbps", c.bandwidth / 1e9}};
}

// The leader's host work per decode plan of 16 sequences: schedule(), encoding the plan and a stage's
// decoding of it, on_step_done(). Every stage also builds the step's batch and checks its ops, which
// the kernels' timings include.
nlohmann::json step_overhead_section() {
  constexpr int kSeqs = 16, kPrompt = 64, kMaxLen = 8192, kBlock = 16;
  SchedulerConfig sc;
  sc.max_num_seqs = kSeqs;
  Scheduler sched(sc, kSeqs * kMaxLen / kBlock, kBlock);
  for (int i = 0; i < kSeqs; ++i) sched.add(i, std::vector<int32_t>(kPrompt, 1), kMaxLen);
  const StepPlan prefill = sched.schedule();
  sched.on_step_done(prefill, std::vector<int32_t>(prefill.num_logits(), 1));
  const double t = median_s([&](int) {
    const StepPlan plan = sched.schedule();
    const StepPlan copy = StepPlan::decode(plan.encode());
    sched.on_step_done(plan, std::vector<int32_t>(copy.num_logits(), 1));
  });
  return {{"method", "the leader's scheduler: schedule(), the plan's encode and decode, on_step_done() for 16 "
                     "sequences decoding; median of 7 samples"},
          {"us", t * 1e6}};
}

// Waits at a barrier of `comm` without spinning a core (MPI's blocking calls busy-poll).
void polite_barrier(MPI_Comm comm) {
  MPI_Request r;
  CONVEYOR_MPI_CHECK(MPI_Ibarrier(comm, &r));
  int done = 0;
  for (;;) {
    CONVEYOR_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

nlohmann::json measure_cpu_device() {
  const CpuCeilings peaks = measure_cpu_ceilings();
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  nlohmann::json j = {{"name", "CPU"}, {"backend", "cpu"}, {"dtype", "fp32"}, {"padded_rows", false},
                      {"bandwidth_gbps", peaks.bandwidth / 1e9}, {"memory_gib", memory / (1ull << 30)}};
  GemmBench gemm;
  j.update(gemm_sections(gemm));
  j["tflops"] = j["gemm_prefill"]["tflops"];
  j.update(attention_sections());
  j["sampling"] = sampling_section();
  j["small_ops"] = small_ops_section();
  j["step_overhead"] = step_overhead_section();
  return j;
}

nlohmann::json measure_core_sharing(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  GemmBench gemm;
  std::vector<double> alone, speed;
  nlohmann::json points = nlohmann::json::array();
  for (int k = 1; k <= size; ++k) {
    polite_barrier(node);
    double t = 0;
    if (rank < k) t = gemm.time(16, 4096, 1024);
    std::vector<double> all(static_cast<size_t>(size));
    polite_barrier(node);
    CONVEYOR_MPI_CHECK(MPI_Allgather(&t, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, node));
    double sum = 0;
    for (int r = 0; r < k; ++r) sum += all[static_cast<size_t>(r)];
    const double mean = sum / k;
    if (k == 1) alone.push_back(mean);
    speed.push_back(alone.front() / mean);
    points.push_back({{"ranks", k}, {"time_us", mean * 1e6}});
  }
  MPI_Comm_free(&node);
  return {{"method", "k = 1 .. the node's ranks run matmul_ref m = 16, n = 4096, k = 1024 (fp32, weights rotating "
                     "over 128 MiB each) at once, the others waiting without spinning; speed = time alone / mean time"},
          {"cpus", static_cast<int>(std::thread::hardware_concurrency())}, {"ranks", size}, {"speed", speed},
          {"points", points}};
}

nlohmann::json measure_cpu_host(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  polite_barrier(comm);
  nlohmann::json device;
  if (rank == 0) device = measure_cpu_device();
  polite_barrier(comm);
  nlohmann::json sharing = measure_core_sharing(comm);
  if (rank == 0) device["sharing"] = std::move(sharing);
  return device;
}

std::string format_cpu_device(const nlohmann::json& d) {
  if (d.is_null()) return "";
  std::ostringstream os;
  char line[256];
  os << "device ceilings (CPU, fp32, this rank's threads; for conveyor plan --doctor-json):\n";
  for (const auto& b : d.at("gemm_decode").at("buckets")) {
    std::snprintf(line, sizeof(line), "  matmul m=%-3lld %7.1f us + bytes / %6.1f GB/s\n", b.at("m").get<long long>(),
                  b.at("fixed_us").get<double>(), b.at("bandwidth_gbps").get<double>());
    os << line;
  }
  std::snprintf(line, sizeof(line), "  matmul prefill   %6.1f GFLOP/s; triad %.1f GB/s\n",
                1e3 * d.at("gemm_prefill").at("tflops").get<double>(), d.at("bandwidth_gbps").get<double>());
  os << line;
  const auto& a = d.at("attention_decode");
  std::snprintf(line, sizeof(line), "  decode attention %7.1f us + KV bytes / %6.1f GB/s; prefill attention %.1f GFLOP/s\n",
                a.at("fixed_us").get<double>(), a.at("bandwidth_gbps").get<double>(),
                1e3 * d.at("attention_prefill").at("tflops").get<double>());
  os << line;
  const auto& s = d.at("sampling");
  std::snprintf(line, sizeof(line), "  greedy sampling  %7.1f us + logit bytes / %6.1f GB/s per row\n",
                s.at("fixed_us").get<double>(), s.at("bandwidth_gbps").get<double>());
  os << line;
  const auto& o = d.at("small_ops");
  std::snprintf(line, sizeof(line), "  small ops        %7.2f us + bytes / %6.1f GB/s\n", o.at("fixed_us").get<double>(),
                o.at("bandwidth_gbps").get<double>());
  os << line;
  std::snprintf(line, sizeof(line), "  host work per step %6.1f us\n", d.at("step_overhead").at("us").get<double>());
  os << line;
  if (d.contains("sharing")) {
    os << "  a rank's speed while k ranks of this node compute:";
    int k = 1;
    for (const auto& v : d.at("sharing").at("speed")) {
      std::snprintf(line, sizeof(line), " k=%d %.2f", k++, v.get<double>());
      os << line;
    }
    os << " (" << d.at("sharing").at("cpus").get<int>() << " CPUs)\n";
  }
  return os.str();
}

}  // namespace conveyor
