// The anatomy of the engine's steps, from the leader's step stamps (runtime/core/step_stamps.h), for
// `conveyor bench --step-timeline`: over the steady decode steps of the most common batch size, where
// the period between two steps' starts goes. Host phases: schedule (the scheduler and the plan),
// apply (the sampler learns the plan), metadata (the step's BatchInfo built and handed to the ops),
// forward (the rest of the forward call: kernel or graph launches on a GPU, the computation itself on
// the CPU backend), sample (sampling, on a GPU waiting for the
// device's tokens), wait (the engine's wait for the result), post (stop checks, outputs), other (the
// caller between steps). Device spans: gpu metadata (from the mark before the forward call to the one
// after the metadata: the upload, and the device waiting for the host), gpu forward, gpu sample, and
// the device's idle time (the period less these).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/core/step_stamps.h"

namespace conveyor {

// {"batch", "steps", "period_us", "phases": [{"phase", "side", "mean_us", "pct"}], "device_idle_us",
// "example": {"step", "period_us", "spans": [{"phase", "side", "begin_us", "end_us"}]}}; the example is
// the selected step whose period is the median. {"steps": 0, "why": ...} when no step qualifies.
nlohmann::json step_anatomy(const StepStamps& stamps);

// The anatomy as a table (one line per phase) and the example step's spans.
std::string format_step_anatomy(const nlohmann::json& anatomy);

}  // namespace conveyor
