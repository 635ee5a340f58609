// Logging set-up (see log.h).
#include "runtime/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "runtime/core/error.h"

namespace conveyor {

void init_logging(int rank, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("conveyor");
  std::string prefix = rank >= 0 ? "[rank " + std::to_string(rank) + " " + process_identity().host + "] " : "";
  logger->set_pattern("%H:%M:%S.%e " + prefix + "%^%l%$: %v");
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (rank > 0 && lvl < spdlog::level::warn) lvl = spdlog::level::warn;
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
}

}  // namespace conveyor
