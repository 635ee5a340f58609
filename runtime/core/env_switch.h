// The process's A/B switches: env_switch_on (CONVEYOR_PDL, CONVEYOR_FUSED_FP8_INPUT, ...) is on unless the
// variable is "0"; env_switch_opt_in (CONVEYOR_FUSED_GEMV, CONVEYOR_COLD_GEMM_TUNE) only where it is "1".
// Header-only, so CUDA translation units take it too; callers read it once (a function-local static).
#pragma once

#include <cstdlib>
#include <cstring>

namespace conveyor {

inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

inline bool env_switch_opt_in(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace conveyor
