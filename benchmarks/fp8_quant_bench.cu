// Microbenchmark of the FP8 activation quantizers of a Llama-3-8B layer (hidden 4096, intermediate 14336): the
// pre-norm quantizer (rms_norm_quantize_fp8_cuda), the attention output's (quantize_rows_fp8_cuda) and the
// SwiGLU one (silu_mul_quantize_fp8_cuda) at decode batch sizes. "hot": one buffer timed back to back, so the
// input sits in L2 as it does after the GEMM that wrote it; "cold": four copies in turn (more than L2 holds).
// GB/s counts the 16-bit input and the codes once. Usage: fp8_quant_bench [--json PATH]
// (CONVEYOR_WIDE_HELD_ROWS=0 times the SwiGLU quantizer without the wide spread.)
#include <cstdint>
#include <string>
#include <vector>

#include "benchmarks/dense_bench_util.h"
#include "kernels/cuda/fp8.h"

namespace {

using conveyor::DType;
using conveyor::bench::Case;
using conveyor::bench::DeviceArray;

struct Buffers {
  std::vector<DeviceArray> in;
  std::vector<conveyor::CudaBuffer> q, scales;
  Buffers(int copies, int64_t in_elems, int64_t rows, int64_t cols) {
    for (int c = 0; c < copies; ++c) {
      in.emplace_back(in_elems, DType::kBF16, 11u + c);
      q.emplace_back(static_cast<size_t>(rows * cols), "fp8 codes");
      scales.emplace_back(static_cast<size_t>(rows) * sizeof(float), "fp8 scales");
    }
  }
  uint8_t* codes(int i) { return q[i % q.size()].as<uint8_t>(); }
  float* scale(int i) { return scales[i % scales.size()].as<float>(); }
  const void* x(int i) const { return in[i % in.size()].get(); }
};

Case make_case(const std::string& name, int64_t rows, int64_t cols, double us, double in_elems) {
  Case c;
  c.name = name;
  c.shape = "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
  c.dtype = "bf16->fp8_e4m3";
  c.time_us = us;
  c.bytes = 2.0 * in_elems + static_cast<double>(rows * cols);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    conveyor::bench::Report report(argc, argv);
    cudaStream_t s;
    CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int64_t hidden = 4096, inter = 14336;
    DeviceArray w(hidden, DType::kBF16, 3u);
    for (int64_t rows : {1, 16, 64, 128, 256, 512}) {
      for (int copies : {1, 4}) {
        if (copies == 4 && rows != 256) continue;
        const std::string tag = copies == 1 ? " hot" : " cold";
        Buffers su(copies, rows * 2 * inter, rows, inter), h(copies, rows * hidden, rows, hidden);
        double us = conveyor::bench::median_us([&](int i) {
          CONVEYOR_CHECK(conveyor::silu_mul_quantize_fp8_cuda(su.codes(i), su.scale(i), su.x(i), DType::kBF16, rows,
                                                              inter, 0.f, s), "silu_mul_quantize_fp8_cuda declined");
        }, s);
        report.add(make_case("silu_mul_quantize" + tag, rows, inter, us, 2.0 * rows * inter));
        us = conveyor::bench::median_us([&](int i) {
          const bool ran = conveyor::rms_norm_quantize_fp8_cuda(h.codes(i), h.scale(i), h.x(i), w.get(), DType::kBF16,
                                                                rows, hidden, 1e-5f, 0.f, s);
          CONVEYOR_CHECK(ran, "rms_norm_quantize_fp8_cuda declined");
        }, s);
        report.add(make_case("rms_norm_quantize" + tag, rows, hidden, us, static_cast<double>(rows * hidden)));
        us = conveyor::bench::median_us([&](int i) {
          conveyor::quantize_rows_fp8_cuda(h.codes(i), h.scale(i), h.x(i), DType::kBF16, rows, hidden, 0.f, s);
        }, s);
        report.add(make_case("quantize_rows" + tag, rows, hidden, us, static_cast<double>(rows * hidden)));
      }
    }
    CONVEYOR_CUDA_CHECK(cudaStreamDestroy(s));
    return report.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8_quant_bench: %s\n", e.what());
    return 1;
  }
}
