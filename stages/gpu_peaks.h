// The GPUs the planner and the bench rooflines know by name: dense GEMM rates, memory bandwidth and
// memory per GPU. A doctor JSON names its GPU, so a plan made from it takes that GPU's figures.
#pragma once

#include <string>

namespace conveyor {

struct GpuPeaks {
  const char* preset;  // "h200", "h100": the name a cluster file's gpu.preset uses
  const char* label;   // "H200": how reports name it
  double flops;        // dense bf16 GEMM, FLOP/s
  double fp8_flops;    // dense FP8 GEMM, FLOP/s
  double bandwidth;    // memory, bytes/s
  double memory;       // bytes per GPU
};

// H200: measured on one (cuBLASLt bf16 and FP8 GEMM, device copy). H100 (SXM): the same chip and clocks,
// so the same GEMM rates, and the H200's bandwidth scaled by the two cards' HBM figures (3.35 / 4.8 TB/s).
inline constexpr GpuPeaks kH200Peaks{"h200", "H200", 810e12, 1480e12, 4.28e12, 140.0 * (1ull << 30)};
inline constexpr GpuPeaks kH100Peaks{"h100", "H100", 810e12, 1480e12, 4.28e12 * 3.35 / 4.8, 79.6 * (1ull << 30)};

// By preset ("h200", "h100") or by a CUDA device name ("NVIDIA H100 80GB HBM3": the card it names);
// nullptr for any other GPU.
const GpuPeaks* find_gpu_peaks(const std::string& name);

}  // namespace conveyor
