// CPU device measurements for `conveyor doctor` (see stages/cpu_probe.h). Inputs are random; GEMM weights
// rotate over a pool four times the L3 of common hosts so every call streams them from memory, as a decode
// step does (a stage's weights are far larger than the caches). Timings are medians of samples of
// back-to-back calls on the steady clock after a warm-up call.
#include "stages/cpu_probe.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "runtime/core/error.h"
#include "runtime/dist/mpi_communicator.h"
#include "runtime/engine/scheduler.h"
#include "runtime/engine/step_plan.h"
#include "runtime/sampling/sampler.h"
#include "stages/cpu_ceilings.h"
#include "stages/cpu_placement_probe.h"
#include "stages/cpu_quantum_probe.h"
#include "stages/cpu_probe_mpi.h"
#include "stages/cpu_ring_probe.h"
#include "stages/cpu_transport.h"
#include "stages/device_profile.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kPoolFloats = size_t(32) << 20;  // 128 MiB of weights
constexpr int kSamples = 7;
constexpr double kSampleSeconds = 2e-3;  // calls per sample: enough for ~2 ms
constexpr int kSweeps = 3;               // core-sharing sweeps over k
constexpr auto kSharingWindow = std::chrono::milliseconds(250);
constexpr int kHops = 30;
constexpr auto kHopBusy = std::chrono::milliseconds(8);
// Before each hop the sender (and, for busy_hop, the other computing ranks) computes this long while
// rank 1 already waits, as a stage waits through its predecessor's compute: 2, 3, ... 9 ms in turn.
constexpr int kHopLeadMinMs = 2, kHopLeadSpreadMs = 8;
// The TP round probe: a decode step's rows (its matmul of 2 MiB of weights is ~0.5 ms, as a small
// model's layer half), and how long the co-runners go on after the window (the pair's last round).
constexpr int kTpRoundRows = 16;
constexpr auto kTpRoundTail = std::chrono::milliseconds(100);

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

GemmBucket fit_or_average(int m, const std::vector<std::array<double, 3>>& pts) {
  try {
    return fit_gemm_cost(m, pts);
  } catch (const Error&) {
    double bytes = 0, secs = 0;
    for (const auto& p : pts) bytes += p[0], secs += p[2];
    GemmBucket b;
    b.m = m;
    b.cost = LinearCost{0, bytes / secs};
    return b;
  }
}

// y[m, n] = x[m, k] w[n, k]^T with w taken in turn from a 128 MiB pool.
struct GemmBench {
  std::vector<float> pool = random_floats(kPoolFloats, 17);
  std::vector<float> x = random_floats(size_t(256) * 4096, 3);
  std::vector<float> y = std::vector<float>(size_t(256) * 8192);
  size_t next = 0;  // pool offset of the next call's weights
  void call(int m, int n, int k) {
    const size_t w = size_t(n) * k;
    if (next + w > kPoolFloats) next = 0;
    matmul_ref(y.data(), x.data(), pool.data() + next, nullptr, m, n, k);
    next += w;
  }
  // Seconds per call of each shape, the shapes called in turn as a layer calls its projections (each
  // call the next weights of the pool): per shape the mean over at least 5 passes and ~20 ms. The
  // mean, not the median: the calls a virtual CPU loses to its host or an interrupt cost a run too.
  std::vector<double> times(int m, const std::vector<std::pair<int, int>>& shapes) {
    for (const auto& [n, k] : shapes) call(m, n, k);  // untimed pass
    std::vector<std::vector<double>> t(shapes.size());
    double total = 0;
    for (int pass = 0; pass < 5 || total < 20e-3; ++pass) {
      for (size_t j = 0; j < shapes.size(); ++j) {
        const auto t0 = Clock::now();
        call(m, shapes[j].first, shapes[j].second);
        t[j].push_back(seconds_since(t0));
        total += t[j].back();
      }
    }
    std::vector<double> mean;
    for (const auto& v : t) mean.push_back(std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()));
    return mean;
  }
};

// (n, k) of small models' projections per TP rank, 1 to 16 MiB of fp32 weights, k from 256 to 2048; the
// first four are configs/models/cpu-sim-16l.yaml's q|k|v, gate|up, down and o, which the planner then takes
// as timed (GemmBucket::time).
const std::vector<std::pair<int, int>>& gemm_shapes() {
  static const std::vector<std::pair<int, int>> s = {{1024, 512}, {3072, 512}, {512, 1536}, {512, 512},
                                                     {2048, 1024}, {4096, 1024}, {2048, 256}, {512, 2048}};
  return s;
}

// The m = 256 bucket (prefill chunks and large decode batches) takes the shapes up to 4 MiB only: its
// FLOPs dominate the doctor's time. Its rate is also the prefill GEMM speed (the planner's ceiling).
nlohmann::json gemm_sections(GemmBench& b) {
  const std::vector<int> ms = {1, 4, 16, 64, 256};
  auto shapes_at = [](int m) {
    std::vector<std::pair<int, int>> v;
    for (const auto& [n, k] : gemm_shapes())
      if (m < 256 || double(n) * k <= 1.1e6) v.push_back({n, k});
    return v;
  };
  // kSweeps passes over every m, each point's median of them: a slow spell of the host (another
  // process, another VM's memory traffic) lands in one pass, not in one bucket.
  std::map<int, std::vector<std::vector<double>>> sweeps;
  for (int sweep = 0; sweep < kSweeps; ++sweep)
    for (int m : ms) sweeps[m].push_back(b.times(m, shapes_at(m)));
  nlohmann::json buckets = nlohmann::json::array();
  double flops = 0, secs = 0;
  for (int m : ms) {
    const auto shapes = shapes_at(m);
    nlohmann::json points = nlohmann::json::array();
    std::vector<std::array<double, 3>> fit;
    for (size_t j = 0; j < shapes.size(); ++j) {
      const auto [n, k] = shapes[j];
      std::vector<double> v;
      for (const auto& sw : sweeps[m]) v.push_back(sw[j]);
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      const double t = v[v.size() / 2], bytes = 4.0 * (double(n) * k + double(m) * k + double(m) * n);
      points.push_back({{"n", n}, {"k", k}, {"bytes", bytes}, {"time_us", t * 1e6}, {"gbps", bytes / t / 1e9}});
      fit.push_back({bytes, double(n), t});
      if (m == 256) flops += 2.0 * m * n * k, secs += t;
    }
    const GemmBucket c = fit_or_average(m, fit);
    buckets.push_back({{"m", m}, {"fixed_us", c.cost.fixed_s * 1e6}, {"bandwidth_gbps", c.cost.bandwidth / 1e9},
                       {"row_ns", c.row_s * 1e9}, {"points", points}});
  }
  return {{"gemm_decode",
           {{"method", "matmul_ref, fp32, y = x w^T for m in {1, 4, 16, 64, 256} x 8 (n, k) of small models (1-16 MiB "
                       "of weights, k 256..2048; m = 256 those up to 4 MiB), called in turn as a layer calls them with "
                       "each call's weights the next of a 128 MiB pool (no cache hits); per shape the mean over "
                       "passes, then the median of 3 sweeps; per m a least-squares fit (weights 1/t^2) of time = fixed + bytes "
                       "/ bandwidth + n * row, bytes = weights + x + y (matmul_ref reduces and stores each output "
                       "feature: a cost per n that bytes alone miss for small k)"},
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

// rms_norm_ref over rows x 1536 into a new output each call, as the CPU ops allocate theirs (zeroed):
// the small ops' fixed cost and the bandwidth they reach on a step's activations.
nlohmann::json small_ops_section() {
  constexpr int kCols = 1536;
  const std::vector<float> x = random_floats(size_t(256) * kCols, 4), w = random_floats(kCols, 5);
  std::vector<std::pair<double, double>> fit;
  for (int rows : {8, 256}) {
    const double t = median_s([&](int) {
      std::vector<float> out(static_cast<size_t>(rows) * kCols);
      rms_norm_ref(out.data(), x.data(), w.data(), rows, kCols, 1e-5f);
    });
    fit.emplace_back(4.0 * (2.0 * rows * kCols + kCols), t);
  }
  const LinearCost c = fit_or_average(fit);
  return {{"method", "rms_norm_ref over {8, 256} x 1536 fp32 into a new zeroed output per call (read x and w, write "
                     "out); fit of time = fixed + bytes / bandwidth"},
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

// One pipeline hop as a stage lives it: rank 1 starts waiting as a stage waits (wait_politely) while
// rank 0 of the node computes for a lead of 2-9 ms (a predecessor's step), then posts a micro-batch's three
// messages (header, plan words, 4 KiB of hidden states: a decode step's, in eager-sized pieces) and goes
// on computing for kHopBusy; rank 1 takes them. Seconds from the send to rank 1 holding the hidden
// states, each of kHops. With `cores_taken` ranks 2, 3, ... compute from the start, so that, with the
// sender, the node's CPUs are all taken while rank 1 waits and wakes.
std::vector<double> hop_times(MpiCommunicator& comm, GemmBench& gemm, bool cores_taken) {
  const int rank = comm.rank();
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  const bool others_busy = cores_taken && rank >= 2 && rank <= cpus;
  std::vector<int64_t> header(2), words(64, 7);
  std::vector<float> hidden(1024, 1.f);
  auto compute = [&](Clock::time_point until) {
    for (int i = 0; Clock::now() < until; ++i)
      matmul_ref(gemm.y.data(), gemm.x.data(), gemm.pool.data() + size_t(i % 64) * 1024 * 512, nullptr, 4, 1024, 512);
  };
  std::vector<double> t;
  for (int h = 0; h < kHops; ++h) {
    polite_barrier(comm.comm());
    const auto lead = std::chrono::milliseconds(kHopLeadMinMs + h % kHopLeadSpreadMs);
    const auto t0 = Clock::now() + lead;
    if (rank == 0) {
      compute(t0);
      const auto sent_at = Clock::now();
      header = {std::chrono::duration_cast<std::chrono::nanoseconds>(sent_at.time_since_epoch()).count(), 64};
      std::vector<std::unique_ptr<CommRequest>> sent;
      sent.push_back(comm.isend(header.data(), 2, DType::kI64, 1, nullptr));
      sent.push_back(comm.isend(words.data(), words.size(), DType::kI64, 1, nullptr));
      sent.push_back(comm.isend(hidden.data(), hidden.size(), DType::kF32, 1, nullptr));
      compute(t0 + kHopBusy);
      for (auto& r : sent) r->wait();
    } else if (rank == 1) {
      wait_politely(*comm.irecv(header.data(), 2, DType::kI64, 0, nullptr));
      comm.recv(words.data(), words.size(), DType::kI64, 0, nullptr);
      comm.recv(hidden.data(), hidden.size(), DType::kF32, 0, nullptr);
      const auto sent_at = Clock::time_point(std::chrono::nanoseconds(header[0]));
      t.push_back(std::chrono::duration<double>(Clock::now() - sent_at).count());
    } else if (others_busy) {
      compute(t0 + kHopBusy);
    }
  }
  // Every sample, not only the mean: a pipeline's hops spread as widely, which keeps its stages out of step.
  t.resize(kHops);
  CONVEYOR_MPI_CHECK(MPI_Bcast(t.data(), kHops, MPI_DOUBLE, 1, comm.comm()));
  return t;
}

// After a barrier of the node, a start instant every rank of it shares: the node's ranks share one steady
// clock, and rank 0's now, a little ahead, is everyone's.
Clock::time_point shared_start(MPI_Comm node) {
  polite_barrier(node);
  int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         (Clock::now() + std::chrono::milliseconds(20)).time_since_epoch()).count();
  CONVEYOR_MPI_CHECK(MPI_Bcast(&start_ns, 1, MPI_INT64_T, 0, node));
  return Clock::time_point{std::chrono::nanoseconds(start_ns)};
}

// A TP pair's round as a TP stage's layers live it: ranks 0 and 1 of the node alternate a decode-sized
// matmul with an all-reduce of a decode step's activations (MPI_Allreduce, as the CPU backend's TP group
// calls it: under mpirun --oversubscribe its wait yields the CPU). With `cores_taken` ranks 2, 3, ...
// compute without pause meanwhile (a prefill, a TP-less stage); else they wait without spinning. Seconds
// per round on rank 0, the mean over kSweeps windows of kSharingWindow (a round's cost to a stage is its
// average, the waits for a CPU included); the pair stops together (a flag rides in the all-reduce).
// Also the co-runners' mean calls of the sharing probe's matmul per second (0 when idle).
std::pair<double, double> tp_round_time(MPI_Comm node, MPI_Comm pair, GemmBench& gemm, bool cores_taken,
                                        int co_calls = 0) {
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  std::vector<float> act(size_t(kTpRoundRows) * 512, 1.f);  // [rows, hidden 512]
  double total = 0, co[2] = {0, 0};  // co: calls per second summed over co-runners and windows, windows
  int64_t rounds = 0;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    const Clock::time_point start = shared_start(node), end = start + kSharingWindow;
    std::this_thread::sleep_until(start);
    if (rank < 2) {
      for (bool more = true; more; ++rounds) {
        gemm.call(kTpRoundRows, 1024, 512);
        act[0] = rank == 0 && Clock::now() < end ? 1.f : 0.f;
        CONVEYOR_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, act.data(), static_cast<int>(act.size()), MPI_FLOAT, MPI_SUM, pair));
        more = act[0] > 0.5f;
      }
      total += seconds_since(start);
    } else if (cores_taken && (co_calls == 0 || rank >= 4)) {
      int calls = 0;
      while (Clock::now() < end + kTpRoundTail) gemm.call(16, 1024, 1024), ++calls;
      co[0] += calls / seconds_since(start), co[1] += 1;
    } else if (cores_taken) {  // ranks 2 and 3: a TP pair of co-runners, co_calls matmuls per all-reduce
      int calls = 0;
      for (bool more = true; more;) {
        for (int c = 0; c < co_calls; ++c) gemm.call(16, 1024, 1024), ++calls;
        act[0] = rank == 2 && Clock::now() < end + kTpRoundTail ? 1.f : 0.f;
        CONVEYOR_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, act.data(), static_cast<int>(act.size()), MPI_FLOAT, MPI_SUM, pair));
        more = act[0] > 0.5f;
      }
      co[0] += calls / seconds_since(start), co[1] += 1;
    }
  }
  double mean = rank == 0 ? total / static_cast<double>(rounds) : 0.0, all[2] = {0, 0};
  CONVEYOR_MPI_CHECK(MPI_Bcast(&mean, 1, MPI_DOUBLE, 0, node));
  CONVEYOR_MPI_CHECK(MPI_Allreduce(co, all, 2, MPI_DOUBLE, MPI_SUM, node));
  return {mean, all[1] > 0 ? all[0] / all[1] : 0.0};
}

}  // namespace

double slice_from_tp_rounds(double alone_s, double busy_s, const std::vector<double>& speed) {
  const int k = static_cast<int>(speed.size());
  CONVEYOR_CHECK(k >= 3, "slice_from_tp_rounds: needs the speeds of 1 .. k >= 3 ranks, got ", k);
  const double g = alone_s * speed[1];
  return std::max(0.0, (k * speed.back() * busy_s - 2.0 * g) / (k - 2));
}

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

// Calls of fn(i) per second on this rank between two steady-clock instants that every rank of the node
// shares, so that exactly the k ranks measuring run for the whole window.
template <typename Fn>
double rate_in_window(Fn&& fn, Clock::time_point start, Clock::time_point end) {
  std::this_thread::sleep_until(start);
  int calls = 0;
  Clock::time_point last = start;
  while ((last = Clock::now()) < end) fn(calls++);
  return calls / std::chrono::duration<double>(last - start).count();
}

namespace {

// The TP round probe (tp_round_time) of a node where ranks outnumber the CPUs (only there do they
// time-slice) and a co-runner exists (a third rank); null elsewhere. rate1: the sharing probe's calls per
// second alone; speed: its speeds by k.
nlohmann::json tp_round_section(MPI_Comm node, int rank, int size, GemmBench& gemm, double rate1,
                                const std::vector<double>& speed) {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (size < 3 || size <= cpus) return nullptr;
  MPI_Comm pair = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_split(node, rank < 2 ? 0 : 1, rank, &pair));
  const double alone = tp_round_time(node, pair, gemm, false).first;
  const auto [busy, co_rate] = tp_round_time(node, pair, gemm, true);
  // Beside a TP pair of co-runners with turns of 1, 2, ... 32 matmuls: how long such a co-runner keeps a
  // CPU the pair yielded (its "hold", the slice of slice_from_tp_rounds), as its turns lengthen.
  nlohmann::json tp_pairs = nlohmann::json::array();
  if (size >= 4) {
    for (int co_calls : {1, 2, 4, 8, 16, 32}) {
      const auto [b, r] = tp_round_time(node, pair, gemm, true, co_calls);
      tp_pairs.push_back({{"corunner_turn_us", co_calls / rate1 * 1e6}, {"busy_us", b * 1e6},
                          {"corunner_speed", r / rate1}, {"hold_us", slice_from_tp_rounds(alone, b, speed) * 1e6}});
    }
  }
  MPI_Comm_free(&pair);
  // corunner_speed: what the ranks beside the pair got, against speed[k-1] (they may lose CPU to its waits).
  return {{"alone_us", alone * 1e6}, {"busy_us", busy * 1e6}, {"corunner_speed", co_rate / rate1},
          {"slice_us", slice_from_tp_rounds(alone, busy, speed) * 1e6}, {"beside_tp_pairs", tp_pairs}};
}

std::vector<double> in_us(std::vector<double> s) {
  for (double& x : s) x *= 1e6;
  return s;
}
double mean_us(const std::vector<double>& s) { return std::accumulate(s.begin(), s.end(), 0.0) / s.size() * 1e6; }

}  // namespace

nlohmann::json measure_core_sharing(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  CONVEYOR_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  GemmBench gemm;
  auto call = [&](int) { gemm.call(16, 1024, 1024); };
  // Per k, the best of kSweeps windows (another process's burst on the host slows one window, not all).
  std::vector<double> best(static_cast<size_t>(size), 0.0);
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    for (int ranks = 1; ranks <= size; ++ranks) {
      const Clock::time_point start = shared_start(node);
      double rate = rank < ranks ? rate_in_window(call, start, start + kSharingWindow) : 0.0;
      std::vector<double> all(static_cast<size_t>(size));
      polite_barrier(node);
      CONVEYOR_MPI_CHECK(MPI_Allgather(&rate, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, node));
      const double mean = std::accumulate(all.begin(), all.begin() + ranks, 0.0) / ranks;
      best[static_cast<size_t>(ranks - 1)] = std::max(best[static_cast<size_t>(ranks - 1)], mean);
    }
  }
  std::vector<double> speed;
  nlohmann::json points = nlohmann::json::array();
  for (int r = 1; r <= size; ++r) {
    speed.push_back(best[static_cast<size_t>(r - 1)] / best.front());
    points.push_back({{"ranks", r}, {"calls_per_s", best[static_cast<size_t>(r - 1)]}});
  }
  const nlohmann::json tp_round = tp_round_section(node, rank, size, gemm, best.front(), speed);
  const nlohmann::json stayer = measure_stayer_placement(node);
  const nlohmann::json quantum = measure_cpu_quantum(node);
  const nlohmann::json ring = measure_ring_speed(node, [&] { gemm.call(16, 1024, 1024); }, best.front());
  std::vector<double> hop(1, 0.0), busy_hop(1, 0.0);  // seconds per hop, one per sample
  if (size >= 2) {
    MpiCommunicator hops(node, "doctor hop probe");  // takes node
    hops.set_message_limit(kCpuMessageBytes);        // as the pipeline sends
    hop = hop_times(hops, gemm, false);
    busy_hop = hop_times(hops, gemm, true);
  } else {
    MPI_Comm_free(&node);
  }
  nlohmann::json out = {{"method", "k = 1 .. the node's ranks call matmul_ref m = 16, n = k = 1024 (fp32, weights rotating over 128 "
                     "MiB each) with their threads during one shared 0.25 s window, the others waiting without "
                     "spinning; per k the best of 3 windows of the mean rate; speed = rate / rate alone"},
          {"cpus", static_cast<int>(std::thread::hardware_concurrency())}, {"ranks", size}, {"speed", speed},
          {"points", points}, {"hop_us", mean_us(hop)}, {"busy_hop_us", mean_us(busy_hop)},
          {"hop_samples_us", in_us(hop)}, {"busy_hop_samples_us", in_us(busy_hop)},
          {"hop_method", "a pipeline hop: rank 1 waits politely while rank 0 computes for 2-9 ms, then posts header, "
                         "64 plan words and 4 KiB of hidden states and computes on (eager-sized pieces, as the pipeline "
                         "sends), rank 1 receives them; mean "
                         "of 30 send-to-received times with the node's other ranks idle (hop_us) and with ranks 2, 3, "
                         "... computing so that the node's CPUs are all taken (busy_hop_us)"}};
  if (quantum["turns"].get<int>() > 0) out["quantum_us"] = quantum["quantum_us"];
  out["quantum"] = quantum;
  if (!stayer.is_null()) {
    out["stickiness"] = nlohmann::json::array();
    for (const auto& b : stayer["by_ranks"])
      if (b["stickiness"].get<double>() >= 0) out["stickiness"].push_back({{"ranks", b["ranks"]}, {"value", b["stickiness"]}});
    out["stayer"] = stayer;
  }
  if (!ring.is_null()) {
    out["pipeline_speed"] = ring["by_ranks"];
    out["ring"] = ring;
  }
  if (!tp_round.is_null()) {
    out["slice_us"] = tp_round["slice_us"];
    out["holds"] = nlohmann::json::array();
    for (const auto& p : tp_round["beside_tp_pairs"])
      out["holds"].push_back({{"turn_us", p["corunner_turn_us"]}, {"hold_us", p["hold_us"]}});
    out["tp_round"] = tp_round;
    out["tp_round"]["method"] =
        "a TP pair's round: ranks 0 and 1 alternate matmul_ref m = 16, n = 1024, k = 512 with an MPI_Allreduce of "
        "16 x 512 fp32 (the stop flag in it), the other ranks idle (alone_us) or computing without pause (busy_us); "
        "mean of 3 windows of 0.25 s; corunner_speed: the others' "
        "rate of the sharing probe's matmul then over its rate alone; beside_tp_pairs: ranks 2 and 3 as a TP pair too, "
        "with turns of 1, 2, 4, ... 32 such matmuls between their all-reduces (corunner_turn_us, solo), and the hold "
        "that gives (the slice formula). slice_us = (k speed[k] busy - 2 g) / (k - 2) with g = alone * speed[2]: the "
        "time a co-runner keeps a CPU the pair yielded (stages/sim/schedule_sim.cpp, shares)";
  }
  return out;
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

}  // namespace conveyor
