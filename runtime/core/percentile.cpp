// percentile (see percentile.h): sorts its own copy, so callers keep their samples in arrival order.
#include "runtime/core/percentile.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace conveyor {

double percentile(std::vector<double> samples, double q) {
  CONVEYOR_CHECK(q >= 0 && q <= 1, "percentile: q must be a fraction in [0, 1], got ", q);
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace conveyor
