// GEMM microbenchmark: GemmRunner (tuned per shape) on decode and prefill shapes of Llama-3 8B and
// 70B, then the 8B decode shapes at m = 1, 4, 16 three ways: the gemv kernel alone ("gemv"), cuBLASLt
// alone ("cublaslt", best of the heuristic's candidates) and the runner's timed choice ("runner"; the
// choices go to stderr). Decode shapes are weight-bandwidth bound (GB/s counts weights + x + y); the
// square one is compute bound (TFLOP/s). Weights rotate over copies totalling >= 256 MiB so no call
// finds them in L2. Usage: gemm_bench [--json PATH] [--f16] [--no-autotune]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/dense_bench_util.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"

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

// Weight copies of one shape (enough that a rotation never hits L2) with x and y.
struct Operands {
  Operands(Shape s, DType ab) : x(s.m * s.k, ab, 3u), y(s.m * s.n, s.f32_out ? DType::kF32 : ab, 5u) {
    const double weight_bytes = static_cast<double>(s.n) * s.k * conveyor::dtype_size(ab);
    const int copies = static_cast<int>(std::max(1.0, std::ceil((256.0 * (1 << 20)) / weight_bytes)));
    for (int c = 0; c < copies; ++c) weights.push_back(std::make_unique<DeviceArray>(s.n * s.k, ab, 17u + c));
  }
  const void* w(int i) const { return weights[static_cast<size_t>(i) % weights.size()]->get(); }
  std::vector<std::unique_ptr<DeviceArray>> weights;
  DeviceArray x, y;
};

// Times fn(y, x, w) over the rotating weights; `name` gets "_f32_out" for logits.
Case bench_one(const std::string& name, const Operands& ops, Shape s, DType ab, cudaStream_t stream,
               const std::function<void(void*, const void*, const void*)>& fn) {
  const DType out = s.f32_out ? DType::kF32 : ab;
  const double us = conveyor::bench::median_us([&](int i) { fn(ops.y.get(), ops.x.get(), ops.w(i)); }, stream);
  Case c;
  c.name = s.f32_out ? name + "_f32_out" : name;
  c.shape = "m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n);
  c.dtype = conveyor::dtype_name(ab);
  c.time_us = us;
  c.bytes = static_cast<double>(s.n) * s.k * conveyor::dtype_size(ab) +
            static_cast<double>(s.m) * s.k * conveyor::dtype_size(ab) +
            static_cast<double>(s.m) * s.n * conveyor::dtype_size(out);
  c.flops = 2.0 * s.m * s.n * s.k;
  return c;
}

std::function<void(void*, const void*, const void*)> via(conveyor::GemmRunner& gemm, Shape s, DType ab,
                                                         cudaStream_t stream) {
  const DType out = s.f32_out ? DType::kF32 : ab;
  return [&gemm, s, ab, out, stream](void* y, const void* x, const void* w) {
    gemm.run(y, out, x, w, ab, nullptr, s.m, s.n, s.k, stream);
  };
}

// Llama-3 8B decode: qkv, o, gate+up, down and the LM head (f32 logits), each three ways.
void bench_decode(conveyor::bench::Report& report, DType ab, bool autotune, cudaStream_t stream) {
  conveyor::bench::BenchGemm runner, cublaslt;
  runner.set_autotune(autotune);
  cublaslt.set_autotune(autotune);
  cublaslt.set_gemv_policy(conveyor::GemvPolicy::kNever);
  for (int64_t m : {1, 4, 16}) {
    for (Shape s : {Shape{m, 4096, 6144}, Shape{m, 4096, 4096}, Shape{m, 4096, 28672}, Shape{m, 14336, 4096},
                    Shape{m, 4096, 128256, true}}) {
      const Operands ops(s, ab);
      const DType out = s.f32_out ? DType::kF32 : ab;
      report.add(bench_one("decode_gemv", ops, s, ab, stream, [&](void* y, const void* x, const void* w) {
        conveyor::gemv_cuda(y, out, x, w, nullptr, s.m, s.n, s.k, false, ab, stream);
      }));
      report.add(bench_one("decode_cublaslt", ops, s, ab, stream, via(cublaslt, s, ab, stream)));
      report.add(bench_one("decode_runner", ops, s, ab, stream, via(runner, s, ab, stream)));
    }
  }
  std::fprintf(stderr, "runner choices:\n%scublaslt-only choices:\n%s", runner.describe().c_str(),
               cublaslt.describe().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    conveyor::bench::Report report(argc, argv);
    const DType ab = has_flag(argc, argv, "--f16") ? DType::kF16 : DType::kBF16;
    conveyor::bench::BenchGemm gemm;
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
    for (const Shape& s : shapes) {
      const Operands ops(s, ab);
      report.add(bench_one("gemm", ops, s, ab, stream, via(gemm, s, ab, stream)));
    }
    bench_decode(report, ab, !has_flag(argc, argv, "--no-autotune"), stream);
    CONVEYOR_CUDA_CHECK(cudaStreamDestroy(stream));
    return report.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return 1;
  }
}
