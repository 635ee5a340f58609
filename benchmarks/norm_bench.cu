// Microbenchmark of the memory-bound dense kernels: rms_norm and silu_mul at
// decode and prefill token counts (Llama-3 70B hidden 8192, 8B intermediate 14336). GB/s counts
// every byte read and written once. Usage: norm_bench [--json PATH] [--f16]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>

#include "benchmarks/dense_bench_util.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/silu_mul.h"

namespace {

using conveyor::DType;
using conveyor::bench::Case;
using conveyor::bench::DeviceArray;

Case make_case(const char* name, int64_t rows, int64_t cols, DType dt, double us, double elems_moved) {
  Case c;
  c.name = name;
  c.shape = "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
  c.dtype = conveyor::dtype_name(dt);
  c.time_us = us;
  c.bytes = elems_moved * conveyor::dtype_size(dt);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    conveyor::bench::Report report(argc, argv);
    DType dt = DType::kBF16;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--f16") == 0) dt = DType::kF16;
    }
    cudaStream_t s;
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const float eps = 1e-5f;
    for (int64_t rows : {1, 16, 256, 4096}) {
      const int64_t cols = 8192, n = rows * cols;
      DeviceArray x(n, dt, 1u), w(cols, dt, 3u), out(n, dt, 4u);
      const double us = conveyor::bench::median_us(
          [&](int) { conveyor::rms_norm_cuda(out.get(), x.get(), w.get(), rows, cols, eps, dt, s); }, s);
      report.add(make_case("rms_norm", rows, cols, dt, us, 2.0 * n + cols));
    }
    for (int64_t tokens : {1, 16, 256, 4096}) {
      const int64_t inter = 14336;
      DeviceArray gate_up(tokens * 2 * inter, dt, 5u), out(tokens * inter, dt, 6u);
      const double us = conveyor::bench::median_us(
          [&](int) { conveyor::silu_mul_cuda(out.get(), gate_up.get(), tokens, inter, dt, s); }, s);
      report.add(make_case("silu_mul", tokens, inter, dt, us, 3.0 * tokens * inter));
    }
    CONVEYOR_CUDA_CHECK(cudaStreamDestroy(s));
    return report.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "norm_bench: %s\n", e.what());
    return 1;
  }
}
