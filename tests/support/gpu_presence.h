// Number of visible CUDA devices (0 in a build without CUDA or on a machine without a GPU).
#pragma once

namespace conveyor::testing {
int gpu_count();
}
