// Link measurements for `conveyor doctor` (see runtime/dist/link_probe.h). Edges and groups are measured one at
// a time (world barrier between them) so each number is the link alone, not links competing.
#include "runtime/dist/link_probe.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Gathers one string per rank to rank 0 (others get an empty vector).
std::vector<std::string> gather_strings(const std::string& s) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int len = static_cast<int>(s.size());
  std::vector<int> lens(size), offs(size);
  CONVEYOR_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < size; ++r) offs[r] = total, total += lens[r];
  std::vector<char> buf(std::max(total, 1));
  CONVEYOR_MPI_CHECK(MPI_Gatherv(s.data(), len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR, 0,
                                 MPI_COMM_WORLD));
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.emplace_back(buf.data() + offs[r], lens[r]);
  return out;
}

std::vector<double> reduce_max(std::vector<double> v) {
  std::vector<double> out(v.size(), 0.0);
  CONVEYOR_MPI_CHECK(MPI_Reduce(v.data(), out.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, 0,
                                MPI_COMM_WORLD));
  return out;
}

// Returns {bandwidth GB/s, one-way latency us}, measured on the receiving side (dst).
std::pair<double, double> measure_edge(Communicator& pipe, Device& dev, Stream stream, void* buf, void* small,
                                       bool is_src, int peer, const DoctorOptions& opt) {
  const int kPing = 50;
  auto ping = [&](int reps) {
    for (int i = 0; i < reps; ++i) {
      if (is_src) {
        pipe.send(small, 8, DType::kU8, peer, stream);
        pipe.recv(small, 8, DType::kU8, peer, stream);
      } else {
        pipe.recv(small, 8, DType::kU8, peer, stream);
        pipe.send(small, 8, DType::kU8, peer, stream);
      }
      dev.synchronize(stream);
    }
  };
  ping(5);
  double t0 = now_s();
  ping(kPing);
  double latency_us = (now_s() - t0) / (2.0 * kPing) * 1e6;

  auto stream_bytes = [&](int reps) -> double {
    double start = 0;
    if (is_src) {
      pipe.recv(small, 1, DType::kU8, peer, stream);  // "go"
      dev.synchronize(stream);
      for (int i = 0; i < reps; ++i) pipe.send(buf, opt.bytes, DType::kU8, peer, stream);
      dev.synchronize(stream);
      return 0;
    }
    start = now_s();
    pipe.send(small, 1, DType::kU8, peer, stream);
    for (int i = 0; i < reps; ++i) pipe.recv(buf, opt.bytes, DType::kU8, peer, stream);
    dev.synchronize(stream);
    return now_s() - start;
  };
  stream_bytes(2);
  double t = stream_bytes(opt.iters);
  double gbps = is_src ? 0.0 : static_cast<double>(opt.bytes) * opt.iters / t / 1e9;
  return {gbps, is_src ? 0.0 : latency_us};
}

// Seconds of one all-reduce of 8 bytes (2 floats) over `tp`, after a warm-up.
double small_all_reduce_s(Communicator& tp, Device& dev, Stream stream, void* small) {
  const int kReps = 50;
  for (int i = 0; i < 5; ++i) tp.all_reduce(small, small, 2, DType::kF32, ReduceOp::kSum, stream);
  dev.synchronize(stream);
  const double t0 = now_s();
  for (int i = 0; i < kReps; ++i) tp.all_reduce(small, small, 2, DType::kF32, ReduceOp::kSum, stream);
  dev.synchronize(stream);
  return (now_s() - t0) / kReps;
}

}  // namespace

size_t parse_byte_size(const std::string& text) {
  std::string t = trim(text);
  CONVEYOR_CHECK(!t.empty(), "empty byte size");
  size_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K' || last == 'M' || last == 'G') {
    mult = last == 'K' ? (1u << 10) : last == 'M' ? (1u << 20) : (1u << 30);
    t.pop_back();
  }
  char* end = nullptr;
  unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  CONVEYOR_CHECK(end && *end == '\0' && v > 0, "bad byte size '", text, "' (examples: 4096, 64M, 1G)");
  return static_cast<size_t>(v) * mult;
}

std::string rank_table(const WorldConfig& world, const MpiRuntime& mpi, const Device& device) {
  DeviceInfo info = device.info();
  RankCoord c = world.coord();
  char line[512];
  std::snprintf(line, sizeof(line), "%5d  %-20s %5d  %-28s %10s  %4d %5d %6d", world.rank(), mpi.host().c_str(),
                mpi.local_rank(), info.name.substr(0, 28).c_str(),
                format_bytes(static_cast<double>(info.total_memory)).c_str(), c.data, c.stage, c.tensor);
  std::vector<std::string> lines = gather_strings(line);
  std::ostringstream os;
  if (mpi.rank() == 0) {
    const Layout& l = world.layout();
    os << "conveyor doctor: " << world.world_size() << " ranks, layout data " << l.data << " x pipeline "
       << l.pipeline << " x tensor " << l.tensor << ", backend " << backend_name(info.backend) << "\n\n";
    os << " rank  host                 local  device                           memory  data stage tensor\n";
    for (const auto& s : lines) os << s << "\n";
    os << "\n";
  }
  return os.str();
}

DoctorReport measure_links(const WorldConfig& world, ProcessGroups& groups, Device& device, const DoctorOptions& opt) {
  const Layout& l = world.layout();
  DeviceBuffer buf(&device, opt.bytes), small(&device, 64);
  device.fill_bytes(buf.data(), 1, opt.bytes);
  device.fill_bytes(small.data(), 0, 64);
  Stream stream = device.create_stream();
  std::vector<std::string> hosts = gather_strings(process_identity().host);

  DoctorReport report;
  std::vector<double> bw, lat;
  for (int d = 0; d < l.data; ++d)
    for (int t = 0; t < l.tensor; ++t)
      for (int s = 0; s + 1 < l.pipeline; ++s) {
        EdgeResult e;
        e.data = d, e.tensor = t, e.stage = s;
        e.src_rank = world.rank_of({d, s, t});
        e.dst_rank = world.rank_of({d, s + 1, t});
        CONVEYOR_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        std::pair<double, double> r{0, 0};
        if (world.rank() == e.src_rank || world.rank() == e.dst_rank) {
          bool is_src = world.rank() == e.src_rank;
          r = measure_edge(*groups.pipeline, device, stream, buf.data(), small.data(), is_src,
                           is_src ? s + 1 : s, opt);
        }
        bw.push_back(r.first);
        lat.push_back(r.second);
        report.edges.push_back(e);
      }

  std::vector<double> ar_time, ar_small;
  for (int d = 0; d < l.data; ++d)
    for (int s = 0; s < l.pipeline && l.tensor > 1; ++s) {
      GroupResult g;
      g.data = d, g.stage = s;
      for (int t = 0; t < l.tensor; ++t) g.ranks.push_back(world.rank_of({d, s, t}));
      CONVEYOR_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
      double elapsed = 0, small_s = 0;
      if (world.data_rank() == d && world.stage() == s) {
        size_t count = opt.bytes / sizeof(float);
        for (int i = 0; i < 2; ++i) groups.tensor->all_reduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum, stream);
        device.synchronize(stream);
        double t0 = now_s();
        for (int i = 0; i < opt.iters; ++i)
          groups.tensor->all_reduce(buf.data(), buf.data(), count, DType::kF32, ReduceOp::kSum, stream);
        device.synchronize(stream);
        elapsed = now_s() - t0;
        small_s = small_all_reduce_s(*groups.tensor, device, stream, small.data());
      }
      ar_time.push_back(elapsed);
      ar_small.push_back(small_s);
      report.groups.push_back(g);
    }
  device.destroy_stream(stream);

  bw = reduce_max(bw);
  lat = reduce_max(lat);
  ar_time = reduce_max(ar_time);
  ar_small = reduce_max(ar_small);
  if (world.rank() == 0) {
    for (size_t i = 0; i < report.edges.size(); ++i) {
      report.edges[i].bandwidth_gbps = bw[i];
      report.edges[i].latency_us = lat[i];
      report.edges[i].src_host = hosts[report.edges[i].src_rank];
      report.edges[i].dst_host = hosts[report.edges[i].dst_rank];
    }
    for (size_t i = 0; i < report.groups.size(); ++i) {
      double n = l.tensor;
      double algbw = ar_time[i] > 0 ? static_cast<double>(opt.bytes / sizeof(float) * sizeof(float)) * opt.iters /
                                          ar_time[i] / 1e9
                                    : 0;
      report.groups[i].algbw_gbps = algbw;
      report.groups[i].busbw_gbps = algbw * 2.0 * (n - 1) / n;
      report.groups[i].latency_us = ar_small[i] * 1e6;
    }
  }
  return report;
}

std::string format_report(const DoctorReport& report, const DoctorOptions& opt) {
  std::ostringstream os;
  char line[512];
  if (report.edges.empty()) {
    os << "pipeline edges: none (pipeline size 1)\n";
  } else {
    double best = 0;
    for (const auto& e : report.edges) best = std::max(best, e.bandwidth_gbps);
    os << "pipeline edges (p2p, " << format_bytes(static_cast<double>(opt.bytes)) << " messages, " << opt.iters
       << " iterations; latency from 8-byte ping-pong):\n";
    os << " data tensor  stage      ranks        hosts                                  GB/s    latency us\n";
    for (const auto& e : report.edges) {
      bool slow = e.bandwidth_gbps < opt.slow_ratio * best;
      std::string hosts = e.src_host + " -> " + e.dst_host;
      std::snprintf(line, sizeof(line), " %4d %6d  %2d -> %-2d  %4d -> %-4d  %-36s %8.1f  %10.1f%s\n", e.data,
                    e.tensor, e.stage, e.stage + 1, e.src_rank, e.dst_rank, hosts.substr(0, 36).c_str(),
                    e.bandwidth_gbps, e.latency_us, slow ? "  SLOW: below best link" : "");
      os << line;
    }
  }
  if (report.groups.empty()) {
    os << "tensor-parallel groups: none (tensor size 1)\n";
  } else {
    double best = 0;
    for (const auto& g : report.groups) best = std::max(best, g.busbw_gbps);
    os << "tensor-parallel groups (all-reduce, fp32, " << format_bytes(static_cast<double>(opt.bytes))
       << "; latency of 8 bytes):\n";
    os << " data stage  ranks                algbw GB/s  busbw GB/s  latency us\n";
    for (const auto& g : report.groups) {
      std::vector<std::string> r;
      for (int x : g.ranks) r.push_back(std::to_string(x));
      bool slow = g.busbw_gbps < opt.slow_ratio * best;
      std::snprintf(line, sizeof(line), " %4d %5d  %-20s %10.1f  %10.1f  %10.1f%s\n", g.data, g.stage,
                    join(r, ",").substr(0, 20).c_str(), g.algbw_gbps, g.busbw_gbps, g.latency_us,
                    slow ? "  SLOW: below best group" : "");
      os << line;
    }
  }
  return os.str();
}

nlohmann::json report_json(const DoctorReport& report, const WorldConfig& world, Backend backend) {
  nlohmann::json j;
  j["world_size"] = world.world_size();
  j["layout"] = {{"data", world.layout().data}, {"pipeline", world.layout().pipeline}, {"tensor", world.layout().tensor}};
  j["backend"] = backend_name(backend);
  j["edges"] = nlohmann::json::array();
  for (const auto& e : report.edges)
    j["edges"].push_back({{"data", e.data}, {"tensor", e.tensor}, {"stage", e.stage}, {"src_rank", e.src_rank},
                          {"dst_rank", e.dst_rank}, {"src_host", e.src_host}, {"dst_host", e.dst_host},
                          {"bandwidth_gbps", e.bandwidth_gbps}, {"latency_us", e.latency_us}});
  j["tensor_groups"] = nlohmann::json::array();
  for (const auto& g : report.groups)
    j["tensor_groups"].push_back({{"data", g.data}, {"stage", g.stage}, {"ranks", g.ranks},
                                  {"algbw_gbps", g.algbw_gbps}, {"busbw_gbps", g.busbw_gbps},
                                  {"latency_us", g.latency_us}});
  return j;
}

}  // namespace conveyor
