// Device ceilings behind `conveyor doctor` for the planner (stages/device_profile.h reads them back):
// the project's own kernels timed on this rank's GPU with CUDA events after a warm-up, medians of
// samples: GemmRunner at decode m buckets and prefill shapes, paged decode and prefill attention, and
// one small kernel inside a CUDA graph. Local to one rank; no MPI. CPU builds and backends measure nothing.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/dist/device.h"

namespace conveyor {

// The JSON "device" section (methods, raw points and fits) for the GPU current on this rank; null on
// the CPU backend or a build without CUDA.
nlohmann::json measure_device(Device& device);

// The section as printed by doctor (empty for null).
std::string format_device(const nlohmann::json& section);

}  // namespace conveyor
