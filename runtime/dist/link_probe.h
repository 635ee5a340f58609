// Measurements behind `conveyor doctor`: the rank table, pipeline-edge p2p bandwidth/latency and
// TP-group all-reduce bus bandwidth. Every function is collective over MPI_COMM_WORLD.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/dist/device.h"
#include "runtime/dist/mpi_runtime.h"
#include "runtime/dist/process_groups.h"
#include "runtime/dist/world_config.h"

namespace conveyor {

struct DoctorOptions {
  size_t bytes = 256u << 20;
  int iters = 20;
  double slow_ratio = 0.5;
};

struct EdgeResult {
  int data = 0, tensor = 0, stage = 0;  // edge from `stage` to `stage + 1`
  int src_rank = 0, dst_rank = 0;
  std::string src_host, dst_host;
  double bandwidth_gbps = 0;  // GB/s (1e9 bytes)
  double latency_us = 0;      // one-way, small message
};

struct GroupResult {
  int data = 0, stage = 0;
  std::vector<int> ranks;
  double algbw_gbps = 0;
  double busbw_gbps = 0;  // algbw * 2(n-1)/n, comparable across group sizes
  double latency_us = 0;  // one all-reduce of 8 bytes: what a collective costs before its bytes
};

struct DoctorReport {
  std::vector<EdgeResult> edges;
  std::vector<GroupResult> groups;
};

size_t parse_byte_size(const std::string& text);  // "256M", "1G", "4096"
std::string rank_table(const WorldConfig& world, const MpiRuntime& mpi, const Device& device);
DoctorReport measure_links(const WorldConfig& world, ProcessGroups& groups, Device& device, const DoctorOptions& opt);
std::string format_report(const DoctorReport& report, const DoctorOptions& opt);
nlohmann::json report_json(const DoctorReport& report, const WorldConfig& world, Backend backend);

}  // namespace conveyor
