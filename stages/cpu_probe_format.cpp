// format_cpu_device (stages/cpu_probe.h): the CPU doctor's section as `conveyor doctor` prints it.
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "stages/cpu_probe.h"

namespace conveyor {

std::string format_cpu_device(const nlohmann::json& d) {
  if (d.is_null()) return "";
  std::ostringstream os;
  char line[256];
  os << "device ceilings (CPU, fp32, " << d.value("threads", 0) << " thread(s) per rank; for conveyor plan --doctor-json):\n";
  for (const auto& b : d.at("gemm_decode").at("buckets")) {
    std::snprintf(line, sizeof(line), "  matmul m=%-3lld %7.1f us + bytes / %6.1f GB/s + %5.0f ns per output\n",
                  b.at("m").get<long long>(), b.at("fixed_us").get<double>(), b.at("bandwidth_gbps").get<double>(),
                  b.value("row_ns", 0.0));
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
    if (d.at("sharing").contains("quantum_us")) {
      const auto& q = d.at("sharing").at("quantum");
      std::snprintf(line, sizeof(line), "  a shared CPU's turns (quantum probe) %.0f us; a 2 ms task woken beside a busy "
                    "rank ran first in %.0f%% (x%.2f on average)\n", d.at("sharing").at("quantum_us").get<double>(),
                    100 * q.at("woken_first").get<double>(), q.at("woken_stretch").get<double>());
      os << line;
    }
    if (d.at("sharing").contains("tp_round")) {
      const auto& t = d.at("sharing").at("tp_round");
      std::snprintf(line, sizeof(line), "  a TP pair's round %6.0f us alone, %6.0f us beside ranks computing (slice %.0f us)\n",
                    t.at("alone_us").get<double>(), t.at("busy_us").get<double>(), t.at("slice_us").get<double>());
      os << line;
    }
    if (d.at("sharing").contains("stayer")) {
      os << "  run queues (stayer probe): ";
      for (const auto& b : d.at("sharing").at("stayer").at("by_ranks")) {
        std::snprintf(line, sizeof(line), "%d ranks: a place holds through a phase %.2f, the stayer doubled up %.0f%%; ",
                      b.at("ranks").get<int>(), b.at("stickiness").get<double>(), 100 * b.at("stayer_share").get<double>());
        os << line;
      }
      os << "\n";
    }
    if (d.at("sharing").contains("pipeline_speed")) {
      os << "  ...as a pipeline meets it (ring probe):";
      for (const auto& b : d.at("sharing").at("pipeline_speed")) {
        os << " " << b.at("ranks").get<int>() << " ranks:";
        int n = 1;
        for (const auto& v : b.at("speed")) {
          std::snprintf(line, sizeof(line), " k=%d %.2f", n++, v.get<double>());
          os << line;
        }
        os << ";";
      }
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace conveyor
