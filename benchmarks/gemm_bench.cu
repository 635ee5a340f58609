// GEMM microbenchmark: GemmRunner (cuBLASLt, tuned per shape) on decode and prefill shapes of
// Llama-3 8B and 70B. Decode shapes are weight-bandwidth bound (GB/s counts weights + x + y); the
// square one is compute bound (TFLOP/s). Weights rotate over copies totalling >= 256 MiB so no call
// finds them in L2. Usage: gemm_bench [--json PATH] [--f16] [--no-autotune]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/dense_bench_util.h"
#include "kernels/cuda/gemm.h"

namespace {

using conveyor::DType;
using conveyor::bench::Case;
using conveyor::bench::DeviceArray;

struct Shape {
  int64_t m, k, n;
  bool f32_out = false;  // LM-head logits
};

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return true;
  }
  return false;
}

Case bench_one(conveyor::GemmRunner& gemm, Shape s, DType ab, cudaStream_t stream) {
  const DType out = s.f32_out ? DType::kF32 : ab;
  const double weight_bytes = static_cast<double>(s.n) * s.k * conveyor::dtype_size(ab);
  const int copies = static_cast<int>(std::max(1.0, std::ceil((256.0 * (1 << 20)) / weight_bytes)));
  std::vector<std::unique_ptr<DeviceArray>> weights;
  for (int c = 0; c < copies; ++c) weights.push_back(std::make_unique<DeviceArray>(s.n * s.k, ab, 17u + c));
  DeviceArray x(s.m * s.k, ab, 3u), y(s.m * s.n, out, 5u);
  const double us = conveyor::bench::median_us(
      [&](int i) {
        gemm.run(y.get(), out, x.get(), weights[i % copies]->get(), ab, nullptr, s.m, s.n, s.k, stream);
      },
      stream);
  Case c;
  c.name = s.f32_out ? "gemm_f32_out" : "gemm";
  c.shape = "m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n);
  c.dtype = conveyor::dtype_name(ab);
  c.time_us = us;
  c.bytes = weight_bytes + static_cast<double>(s.m) * s.k * conveyor::dtype_size(ab) +
            static_cast<double>(s.m) * s.n * conveyor::dtype_size(out);
  c.flops = 2.0 * s.m * s.n * s.k;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    conveyor::bench::Report report(argc, argv);
    const DType ab = has_flag(argc, argv, "--f16") ? DType::kF16 : DType::kBF16;
    conveyor::GemmRunner gemm;
    gemm.set_autotune(!has_flag(argc, argv, "--no-autotune"));
    cudaStream_t stream;
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::vector<Shape> shapes;
    for (int64_t m : {1, 16, 64, 256}) shapes.push_back({m, 8192, 28672});  // 70B gate/up half
    for (int64_t m : {1, 64, 256}) {
      for (int64_t n : {4096, 14336, 6144}) shapes.push_back({m, 4096, n});  // 8B o, up, qkv
    }
    shapes.push_back({16, 4096, 128256, true});  // 8B LM head, f32 logits
    shapes.push_back({4096, 4096, 4096});        // prefill: compute bound
    for (const Shape& s : shapes) report.add(bench_one(gemm, s, ab, stream));
    CONVEYOR_CUDA_CHECK(cudaStreamDestroy(stream));
    return report.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
}
