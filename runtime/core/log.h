// Logging through spdlog with a "[rank N host]" prefix. Rank 0 logs at the configured level; other
// ranks log warnings and errors only, so a large job's output stays readable.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace conveyor {

void init_logging(int rank, const std::string& level);

}  // namespace conveyor
