// Programmatic dependent launch (Hopper, sm_90): a kernel launched with the programmatic-serialization
// attribute may start while the kernel before it on the stream still runs, and waits for that kernel's
// completion and memory (griddepcontrol.wait) only where it first reads what that kernel wrote. The
// kernels of a decode layer (the GEMV, rms_norm, rope + KV write, decode attention and its split merge,
// SiLU-mul) are launched so and wait first (the GEMV after its setup), then signal their dependents
// (pdl_launch_dependents(): the next kernel's CTAs are placed while this one runs), so the gap between two
// kernels of a CUDA graph (0.9 us measured by doctor) overlaps the kernel before. The signal comes after
// the wait: signalled first (round 10), a kernel still waiting let the one after it be placed too, so a
// chain of waiting CTAs could take the SMs' slots from the kernel that runs; round 10 (H100) measured batch
// 1 bf16 0.7% slower with PDL that way, round 11 (H100, signal after the wait) 1.3% faster: 0.7467 s against
// 0.7568 s, 8 of 10 iterations with PDL faster than every one without
// (benchmarks/results/nvidia-h100/2026-12-06-r11). Both are no-ops without the attribute, on older GPUs and
// in the host pass. On by default on devices of compute capability 9.0 or newer; CONVEYOR_PDL=0 (read
// once per process) turns it off.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"

namespace conveyor::cuda_detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n");  // orders nothing: the dependent waits for all of this grid
#endif
}

// Whether launches that support it take the programmatic-serialization attribute: the current device (at
// the first call) of compute capability >= 9.0, unless CONVEYOR_PDL=0.
inline bool pdl_enabled() {
  static const bool on = [] {
    if (!env_switch_on("CONVEYOR_PDL")) return false;
    int device = 0, major = 0;
    CONVEYOR_CUDA_CHECK(cudaGetDevice(&device));
    CONVEYOR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-serialization attribute when
// pdl_enabled(); the kernel must call pdl_wait() before it reads anything the kernel before it wrote and
// before it writes anything that kernel reads.
template <typename... Params, typename... Args>
void launch_maybe_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
  if (!pdl_enabled()) {
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CONVEYOR_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace conveyor::cuda_detail
