// The one percentile rule of the project: numpy.percentile's default, linear interpolation between
// the closest ranks of the sorted samples. q is a fraction in [0, 1] (the batch summary's p50 is
// q = 0.5; bench's integer percentiles pass p / 100.0). An empty sample has percentile 0.
#pragma once

#include <vector>

namespace conveyor {

double percentile(std::vector<double> samples, double q);

}  // namespace conveyor
