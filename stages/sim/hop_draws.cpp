// The mean of a layout's simulated runs with hops drawn from doctor's samples (see hop_draws.h).
#include "stages/sim/hop_draws.h"

#include "runtime/core/error.h"

namespace conveyor {

SimResult mean_of_draws(const std::vector<SimResult>& draws) {
  CONVEYOR_CHECK(!draws.empty(), "internal: the mean of no simulated runs");
  SimResult m = draws.front();
  const double n = static_cast<double>(draws.size());
  auto mean = [&](auto field) {
    double sum = 0;
    for (const SimResult& d : draws) sum += field(d);
    return sum / n;
  };
  m.elapsed_s = mean([](const SimResult& d) { return d.elapsed_s; });
  m.ttft_p50 = mean([](const SimResult& d) { return d.ttft_p50; });
  m.ttft_p90 = mean([](const SimResult& d) { return d.ttft_p90; });
  m.ttft_p99 = mean([](const SimResult& d) { return d.ttft_p99; });
  m.tpot_p50 = mean([](const SimResult& d) { return d.tpot_p50; });
  m.tpot_p90 = mean([](const SimResult& d) { return d.tpot_p90; });
  m.tpot_p99 = mean([](const SimResult& d) { return d.tpot_p99; });
  for (const SimResult& d : draws)
    CONVEYOR_CHECK(d.stages.size() == m.stages.size(), "internal: simulated runs of one layout with ", d.stages.size(),
                   " and ", m.stages.size(), " stages");
  for (size_t s = 0; s < m.stages.size(); ++s) {
    m.stages[s].compute_s = mean([s](const SimResult& d) { return d.stages[s].compute_s; });
    m.stages[s].allreduce_s = mean([s](const SimResult& d) { return d.stages[s].allreduce_s; });
    m.stages[s].overhead_s = mean([s](const SimResult& d) { return d.stages[s].overhead_s; });
    m.stages[s].send_s = mean([s](const SimResult& d) { return d.stages[s].send_s; });
  }
  return m;
}

}  // namespace conveyor
