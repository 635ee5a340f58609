// Doctor's ring probe (see cpu_ring_probe.h). The work is counted in calls, not clock time, so a rank's
// phase ends when its work does, as a stage's does; phases of ~8 ms alone (a decode step of the small
// models this backend serves) and one token per rank in flight (parallel.micro_batches' default).
#include "stages/cpu_ring_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/core/percentile.h"
#include "stages/cpu_probe_mpi.h"
#include "stages/device_profile.h"

namespace conveyor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kPhaseSoloS = 8e-3;
constexpr int kPhasesPerRank = 48;  // ~0.5-1 s a ring; the first round is not counted (start-up)
// Rings per r, each read alone, and per k the median of their speeds: one ring's mix of placements varies, and
// another process's burst on the host slows one ring, not all (two rings pooled let one slow ring pull a run's
// speeds 20% low: benchmarks/results/cpu/2026-12-06-r14).
constexpr int kRepeats = 3;
// A ring's reading at k counts only from this many calls that met k ranks (four phases' worth, ~32 ms): a ring
// of r tokens on r ranks meets small k only while tokens are in flight (k = 1: ~10 calls a ring of 3 on 2
// CPUs, ~6 a ring of 4), and a handful of calls is one moment of the host (the CI doctor of 2026-12-07 read
// k = 1 at 1.53 in a ring of 3, a file conveyor plan refuses).
constexpr int kMinPhases = 4, kMinCallsFloor = 16;

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// Rank `rank` of a ring of `ranks` on `node`: rank 0 starts with every token; each rank computes
// `phases` phases of `calls` calls, one per token received, and passes the token on. Rank 0 receives
// the last round's tokens without computing them.
RingTrace run_ring_rank(MPI_Comm node, int rank, int ranks, int phases, int calls, const std::function<void()>& call) {
  RingTrace t;
  const int prev = (rank + ranks - 1) % ranks, next = (rank + 1) % ranks;
  int token = 0, out = 0, held = rank == 0 ? ranks : 0;  // out: what is sent (token is being received into)
  std::vector<MPI_Request> sends;
  for (int done = 0; done < phases; ++done) {
    if (held == 0) {
      MPI_Request r;
      CONVEYOR_MPI_CHECK(MPI_Irecv(&token, 1, MPI_INT, prev, 0, node, &r));
      wait_napping(&r);
    } else {
      --held;
    }
    const int64_t begin = now_ns();
    for (int c = 0; c < calls; ++c) call(), t.call_ends.push_back(now_ns());
    t.phases.emplace_back(begin, now_ns());
    sends.emplace_back();
    CONVEYOR_MPI_CHECK(MPI_Isend(&out, 1, MPI_INT, next, 0, node, &sends.back()));
  }
  for (int left = rank == 0 ? ranks : 0; left > 0; --left)
    CONVEYOR_MPI_CHECK(MPI_Recv(&token, 1, MPI_INT, prev, 0, node, MPI_STATUS_IGNORE));
  for (MPI_Request& s : sends) wait_napping(&s);
  return t;
}

// Every rank's trace on rank 0 of `node` (the others get none).
std::vector<RingTrace> gather_rings(MPI_Comm node, const RingTrace& mine) {
  std::vector<int64_t> flat = {static_cast<int64_t>(mine.phases.size())};
  for (const auto& [a, b] : mine.phases) flat.push_back(a), flat.push_back(b);
  flat.insert(flat.end(), mine.call_ends.begin(), mine.call_ends.end());
  std::vector<RingTrace> out;
  for (const std::vector<int64_t>& v : gather_to_root(node, flat)) {
    const int64_t* p = v.data();
    RingTrace t;
    const int64_t phases = *p++;
    for (int64_t i = 0; i < phases; ++i, p += 2) t.phases.emplace_back(p[0], p[1]);
    t.call_ends.assign(p, v.data() + v.size());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

void RingSpeed::add(const std::vector<RingTrace>& traces, int64_t from) {
  std::vector<std::pair<int64_t, int>> edges;  // (time, +1 a phase begins / -1 it ends)
  for (const RingTrace& t : traces)
    for (const auto& [a, b] : t.phases) edges.emplace_back(a, 1), edges.emplace_back(b, -1);
  std::sort(edges.begin(), edges.end());  // at one instant an end (-1) sorts before a begin
  std::vector<int64_t> at;
  std::vector<int> k_after;
  int k = 0;
  for (const auto& [time, d] : edges) at.push_back(time), k_after.push_back(k += d);
  auto k_at = [&](int64_t time) {
    const auto i = std::upper_bound(at.begin(), at.end(), time) - at.begin();
    return i == 0 ? 0 : k_after[static_cast<size_t>(i - 1)];
  };
  calls.resize(std::max(calls.size(), traces.size()), 0.0);
  seconds.resize(calls.size(), 0.0);
  for (const RingTrace& t : traces) {
    size_t c = 0;
    for (const auto& [a, b] : t.phases) {
      for (int64_t start = a; c < t.call_ends.size() && t.call_ends[c] <= b; start = t.call_ends[c++]) {
        const int n = k_at(start + (t.call_ends[c] - start) / 2);
        if (start < from || n < 1 || n > static_cast<int>(calls.size())) continue;
        calls[static_cast<size_t>(n - 1)] += 1;
        seconds[static_cast<size_t>(n - 1)] += static_cast<double>(t.call_ends[c] - start) * 1e-9;
      }
    }
  }
}

std::vector<double> RingSpeed::speed(double solo_call_s, double min_calls) const {
  std::vector<double> s(calls.size(), 0.0);
  for (size_t k = 0; k < s.size(); ++k)
    if (seconds[k] > 0 && calls[k] >= min_calls) s[k] = calls[k] * solo_call_s / seconds[k];
  return s;
}

void RingSpeed::merge(const RingSpeed& other) {
  calls.resize(std::max(calls.size(), other.calls.size()), 0.0);
  seconds.resize(calls.size(), 0.0);
  for (size_t k = 0; k < other.calls.size(); ++k) calls[k] += other.calls[k], seconds[k] += other.seconds[k];
}

std::vector<double> median_speed(const std::vector<std::vector<double>>& rings, const std::vector<double>& pooled) {
  std::vector<double> out;
  for (size_t k = 0;; ++k) {
    std::vector<double> met;
    bool any = false;
    for (const std::vector<double>& r : rings) {
      if (k >= r.size()) continue;
      any = true;
      if (r[k] > 0) met.push_back(r[k]);
    }
    if (!any) return out;
    out.push_back(met.empty() && k < pooled.size() ? pooled[k] : percentile(met, 0.5));  // percentile({}) is 0
  }
}

nlohmann::json measure_ring_speed(MPI_Comm node, const std::function<void()>& call, double solo_calls_per_s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (size <= cpus || solo_calls_per_s <= 0) return nullptr;
  const int calls = std::max(1, static_cast<int>(std::lround(kPhaseSoloS * solo_calls_per_s)));
  const int min_calls = std::max(kMinCallsFloor, kMinPhases * calls);
  nlohmann::json by_ranks = nlohmann::json::array();
  for (int ranks = cpus + 1; ranks <= size; ++ranks) {
    std::vector<std::vector<double>> rings;
    RingSpeed pooled;  // the rings kept, together
    for (int rep = 0; rep < kRepeats; ++rep) {
      polite_barrier(node);
      const RingTrace mine = rank < ranks ? run_ring_rank(node, rank, ranks, kPhasesPerRank, calls, call) : RingTrace{};
      polite_barrier(node);  // ranks left out of this ring must not busy-poll in the gather while others run
      std::vector<RingTrace> all = gather_rings(node, mine);
      if (rank != 0) continue;
      all.resize(static_cast<size_t>(ranks));
      RingSpeed one;
      one.add(all, all[0].phases[static_cast<size_t>(ranks)].first);  // from rank 0's second round
      std::vector<double> s = one.speed(1.0 / solo_calls_per_s, min_calls);
      // A reading above the profile's bound says the solo rate was slowed, not this ring fast: the ring is
      // left out (all 0) rather than written as a file conveyor plan refuses.
      if (*std::max_element(s.begin(), s.end()) > CoreSharing::kMaxPipelineSpeed) s.assign(s.size(), 0.0);
      else pooled.merge(one);
      rings.push_back(std::move(s));
    }
    std::vector<double> speed(static_cast<size_t>(ranks), 0.0);
    if (rank == 0) {
      std::vector<double> together = pooled.speed(1.0 / solo_calls_per_s, min_calls);
      for (double& v : together) v = v > CoreSharing::kMaxPipelineSpeed ? 0.0 : v;
      speed = median_speed(rings, together);
    }
    CONVEYOR_MPI_CHECK(MPI_Bcast(speed.data(), ranks, MPI_DOUBLE, 0, node));
    std::vector<double> met = pooled.calls;  // calls per k over the rings kept
    met.resize(static_cast<size_t>(ranks), 0.0);
    CONVEYOR_MPI_CHECK(MPI_Bcast(met.data(), ranks, MPI_DOUBLE, 0, node));
    by_ranks.push_back({{"ranks", ranks}, {"speed", speed}, {"calls", met}, {"calls_per_phase", calls}});
  }
  return {{"by_ranks", by_ranks},
          {"method", "r = cpus + 1 .. the node's ranks pass r tokens round a ring: each waits for its predecessor's token "
                     "in naps of 2-100 us (as wait_politely), computes " + std::to_string(calls) + " calls of the sharing "
                     "probe's matmul (~8 ms alone) and sends it on, " + std::to_string(kPhasesPerRank) + " phases a rank, "
                     "three rings per r, the first round not counted; speed[k - 1]: the solo time of the calls made "
                     "while k ranks computed over the time they took, the median of the rings' that met k in at least " +
                     std::to_string(min_calls) + " calls, else of all rings' calls together where they are that many (0: "
                     "fewer); a ring with a reading above 1.5 is left out; calls[k - 1]: the calls that met k, the rings "
                     "kept"}};
}

}  // namespace conveyor
