// The process's A/B switches (CONVEYOR_PDL, CONVEYOR_FUSED_FP8_INPUT, ...): on unless the variable is "0".
// Header-only, so CUDA translation units take it too; callers read it once (a function-local static).
#pragma once

#include <cstdlib>
#include <cstring>

namespace conveyor {

inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace conveyor
