// The CPU backend: Ops over host fp32 memory, each op one call into kernels/cpu (which threads the
// heavy ones with OpenMP). Weights adopted from the loader keep their buffers (no copy).
#pragma once

#include <memory>

#include "stages/backend.h"

namespace conveyor {

std::unique_ptr<Ops> make_cpu_ops();

}  // namespace conveyor
