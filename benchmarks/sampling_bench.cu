// CudaSampler throughput: 64 rows x 128256 vocab (Llama 3) for greedy, temperature, top-k, top-p and
// all filters with logprobs; times the whole sample() call (it synchronizes once), median of 50.
// Usage: sampling_bench [--json PATH]   (one JSON object per case on stdout)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/sampling.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"

namespace {

constexpr int kRows = 64;
constexpr int64_t kVocab = 128256;
constexpr int kWarmup = 5;
constexpr int kIters = 50;

struct Case {
  std::string name;
  conveyor::SamplingRowParams params;
};

std::vector<Case> cases() {
  conveyor::SamplingRowParams greedy;
  greedy.temperature = 0.f;
  conveyor::SamplingRowParams temp;
  temp.temperature = 0.8f;
  conveyor::SamplingRowParams topk = temp;
  topk.top_k = 50;
  conveyor::SamplingRowParams topp = temp;
  topp.top_p = 0.9;
  conveyor::SamplingRowParams all = topp;
  all.top_k = 1000;
  all.min_p = 0.05;
  all.repetition_penalty = 1.1f;
  all.num_logprobs = 5;
  conveyor::SamplingRowParams lp20 = temp;
  lp20.num_logprobs = 20;
  return {{"greedy", greedy}, {"temperature", temp}, {"top_k50", topk}, {"top_p0.9", topp},
          {"topk_topp_minp_rep_logprobs5", all}, {"temperature_logprobs20", lp20}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc) json_path = argv[++i];
  }
  const size_t n = static_cast<size_t>(kRows) * kVocab;
  std::vector<float> h(n);
  uint64_t x = 88172645463325252ull;
  for (float& v : h) {  // xorshift: random logits in [-10, 10)
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<float>((x >> 40) * (20.0 / (1ull << 24)) - 10.0);
  }
  const conveyor::CudaBuffer logits = conveyor::CudaBuffer::from(h);
  const float* d = logits.as<float>();
  cudaStream_t stream;
  CONVEYOR_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&start));
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&stop));
  const conveyor::CudaBuffer workspace(conveyor::cuda_sampler_workspace_bytes(kVocab, kRows), "the sampler's workspace");
  conveyor::CudaSampler sampler(kVocab, kRows, {128001, 128009}, workspace.data(), workspace.bytes());
  // Each row: a 200-token history of which 20 are outputs.
  std::vector<int64_t> hist_off(kRows + 1), mask_off(kRows + 1, 0);
  std::vector<int32_t> hist, num_out(kRows, 20);
  for (int r = 0; r < kRows; ++r) {
    hist_off[r] = static_cast<int64_t>(hist.size());
    for (int i = 0; i < 200; ++i) hist.push_back(static_cast<int32_t>((r * 7919 + i * 104729) % kVocab));
  }
  hist_off[kRows] = static_cast<int64_t>(hist.size());
  std::vector<std::string> lines;
  for (Case& c : cases()) {
    std::vector<conveyor::SamplingRowParams> params(kRows, c.params);
    for (int r = 0; r < kRows; ++r) params[r].seed = 1000 + r, params[r].step = 20;
    std::vector<float> times;
    for (int it = 0; it < kWarmup + kIters; ++it) {
      CONVEYOR_CUDA_CHECK(cudaEventRecord(start, stream));
      sampler.sample(d, kRows, params, hist_off, hist, num_out, mask_off, {}, stream);
      CONVEYOR_CUDA_CHECK(cudaEventRecord(stop, stream));
      CONVEYOR_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.f;
      CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (it >= kWarmup) times.push_back(ms * 1000.f);
    }
    std::sort(times.begin(), times.end());
    const double us = times[times.size() / 2];
    const double bytes = static_cast<double>(n) * sizeof(float);  // the logits, read at least once
    const double gbs = bytes / (us * 1e-6) / 1e9;
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"name\": \"sampling_%s\", \"shape\": [%d, %lld], \"dtype\": \"f32\", \"time_us\": %.2f, "
                  "\"bytes\": %.0f, \"GB/s\": %.1f, \"TFLOP/s\": 0, \"percent_of_peak\": %.2f}",
                  c.name.c_str(), kRows, static_cast<long long>(kVocab), us, bytes, gbs, 100.0 * gbs / 4280.0);
    std::printf("%s\n", line);
    lines.push_back(line);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "[\n";
    for (size_t i = 0; i < lines.size(); ++i) f << "  " << lines[i] << (i + 1 < lines.size() ? ",\n" : "\n");
    f << "]\n";
  }
  CONVEYOR_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
