// Paged attention microbenchmark: decode (batch 1/16/64 x context 1k/4k/16k, 32 query / 8 KV heads,
// head_dim 128, bf16) reported as GB/s of KV read and % of 4280 GB/s, and causal prefills (one sequence
// of 2k, 4k, 8k and 16k new tokens, 16 sequences of 512, a 512-token chunk after 3,584) reported as
// TFLOP/s and % of 810 (with the runtime's prefill kernel, then each kernel forced: mma.sync, and wgmma on sm_90);
// two decode cases again with the decode grid heads-first (set_decode_heads_first).
// One JSON object per case on stdout; --json PATH writes
// them all as an array. --kv-cache-dtype fp8 reads an e4m3 cache (one byte per element; the GB/s count
// those bytes). Usage: attention_bench [--json results.json] [--kv-cache-dtype fp8]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.h"
#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"

namespace conveyor {
namespace {

constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;
constexpr double kPeakGBs = 4280.0, kPeakTflops = 810.0;

__global__ void fill_random(uint16_t* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (h & 0xffff) / 32768.f - 1.f;  // [-1, 1)
    uint32_t u;
    memcpy(&u, &f, 4);
    x[i] = static_cast<uint16_t>(u >> 16);  // bf16 by truncation is fine for timing
  }
}

// Random e4m3 codes, never NaN (0x7f / 0xff).
__global__ void fill_codes(uint8_t* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    const uint8_t c = static_cast<uint8_t>(h >> 24);
    x[i] = (c & 0x7f) == 0x7f ? c ^ 1 : c;
  }
}

bool g_fp8_kv = false;  // --kv-cache-dtype fp8

// A CudaBuffer (runtime/core/cuda_buffer.h) with its pointer as a field, as the cases read it.
struct DeviceMem {
  conveyor::CudaBuffer buffer;
  void* p;
  explicit DeviceMem(size_t bytes) : buffer(bytes, "a benchmark buffer"), p(buffer.data()) {}
};

void fill(void* p, size_t elems, uint32_t seed) {
  fill_random<<<1024, 256>>>(static_cast<uint16_t*>(p), elems, seed);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

void fill_kv(void* p, size_t elems, uint32_t seed) {
  if (!g_fp8_kv) return fill(p, elems, seed);
  fill_codes<<<1024, 256>>>(static_cast<uint8_t*>(p), elems, seed);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

struct Result {
  std::string json;
};

// batch sequences, each with `history` cached positions and `fresh` new tokens.
Result run(const std::string& name, int batch, int history, int fresh) {
  const int ctx = history + fresh;
  const int blocks_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  const PagedKvShape shape{batch * blocks_per_seq, kBlockSize, kKvHeads, kHeadDim};
  std::vector<int32_t> ids(shape.num_blocks), query_start{0}, positions;
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));  // blocks scattered over the pool, as in serving
  for (int s = 0; s < batch; ++s) {
    for (int p = history; p < ctx; ++p) positions.push_back(p);
    query_start.push_back(query_start.back() + fresh);
  }
  const int tokens = query_start.back();
  const size_t kv_elem = g_fp8_kv ? 1 : 2;
  const KvCacheFormat fmt{g_fp8_kv, KvScales{1.f / 448, 1.f / 448}};
  DeviceMem kc(shape.layer_elems() * kv_elem), vc(shape.layer_elems() * kv_elem);
  DeviceMem q(size_t(tokens) * kHeads * kHeadDim * 2), out(size_t(tokens) * kHeads * kHeadDim * 2);
  DeviceMem qs(query_start.size() * 4), pos(positions.size() * 4), tab(ids.size() * 4);
  DeviceMem ws(paged_attention_workspace_bytes(tokens, kHeads, kHeadDim, ctx));
  fill_kv(kc.p, shape.layer_elems(), 1);
  fill_kv(vc.p, shape.layer_elems(), 2);
  fill(q.p, size_t(tokens) * kHeads * kHeadDim, 3);
  CONVEYOR_CUDA_CHECK(cudaMemcpy(qs.p, query_start.data(), query_start.size() * 4, cudaMemcpyHostToDevice));
  CONVEYOR_CUDA_CHECK(cudaMemcpy(pos.p, positions.data(), positions.size() * 4, cudaMemcpyHostToDevice));
  CONVEYOR_CUDA_CHECK(cudaMemcpy(tab.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  AttentionBatchCuda b;
  b.num_seqs = batch;
  b.num_tokens = tokens;
  b.query_start = static_cast<int32_t*>(qs.p);
  b.positions = static_cast<int32_t*>(pos.p);
  b.block_tables = static_cast<int32_t*>(tab.p);
  b.max_blocks_per_seq = blocks_per_seq;
  b.max_query_len = fresh;
  b.max_context_len = ctx;
  const AttentionParams p{kHeads, 1.f / std::sqrt(float(kHeadDim)), 0};

  cudaEvent_t e0, e1;
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&e0));
  CONVEYOR_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int it = 0; it < 35; ++it) {
    CONVEYOR_CUDA_CHECK(cudaEventRecord(e0));
    paged_attention_cuda(out.p, q.p, kc.p, vc.p, b, shape, p, ws.p, DType::kBF16, nullptr, fmt);
    CONVEYOR_CUDA_CHECK(cudaEventRecord(e1));
    CONVEYOR_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CONVEYOR_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (it >= 5) ms.push_back(t);  // 5 warm-up runs
  }
  CONVEYOR_CUDA_CHECK(cudaEventDestroy(e0));
  CONVEYOR_CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3;
  // KV bytes each sequence must read once; causal score + PV FLOPs over (query, visible key) pairs.
  const double bytes = 2.0 * batch * ctx * kKvHeads * kHeadDim * kv_elem;
  double pairs = 0;
  for (int t = 0; t < fresh; ++t) pairs += history + t + 1;
  const double flops = 4.0 * batch * pairs * kHeads * kHeadDim;
  const double gbs = bytes / us * 1e-3, tflops = flops / us * 1e-6;
  const bool prefill = fresh > 1;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"name\": \"%s\", \"shape\": \"batch=%d history=%d new=%d heads=%d kv_heads=%d head_dim=%d "
                "block_size=%d\", \"dtype\": \"%s\", \"prefill_kernel\": \"%s\", \"time_us\": %.2f, "
                "\"bytes\": %.0f, \"GB/s\": %.1f, \"TFLOP/s\": %.2f, \"percent_of_peak\": %.1f, \"peak\": \"%s\"}",
                name.c_str(), batch, history, fresh, kHeads, kKvHeads, kHeadDim, kBlockSize,
                g_fp8_kv ? "bf16, kv fp8_e4m3" : "bf16", prefill ? prefill_attention_kernel_name() : "none", us, bytes,
                gbs, tflops,
                prefill ? 100.0 * tflops / kPeakTflops : 100.0 * gbs / kPeakGBs,
                prefill ? "810 TFLOP/s" : "4280 GB/s");
  return {buf};
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--kv-cache-dtype") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "fp8") == 0 || std::strcmp(argv[i + 1], "auto") == 0)) {
      conveyor::g_fp8_kv = std::strcmp(argv[++i], "fp8") == 0;
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--kv-cache-dtype auto|fp8]\n", argv[0]);
      return 2;
    }
  }
  std::vector<std::string> all;
  try {
    for (int batch : {1, 16, 64})
      for (int ctx : {1024, 4096, 16384}) {
        const std::string name = "decode_b" + std::to_string(batch) + "_ctx" + std::to_string(ctx);
        all.push_back(conveyor::run(name, batch, ctx - 1, 1).json);
        std::printf("%s\n", all.back().c_str());
      }
    // The decode step of the 1,000-prompt 1024/1024 workload: 256 sequences at its mean context; then it and
    // batch 64 x 4k with the decode grid heads-first (set_decode_heads_first: a token's KV heads adjacent).
    all.push_back(conveyor::run("decode_b256_ctx1536", 256, 1535, 1).json);
    std::printf("%s\n", all.back().c_str());
    conveyor::set_decode_heads_first(true);
    for (const auto& [batch, ctx] : {std::pair{256, 1536}, std::pair{64, 4096}}) {
      const std::string name = "decode_b" + std::to_string(batch) + "_ctx" + std::to_string(ctx) + "_heads_first";
      all.push_back(conveyor::run(name, batch, ctx - 1, 1).json);
      std::printf("%s\n", all.back().c_str());
    }
    conveyor::set_decode_heads_first(false);
    // Causal prefill of one sequence (issue 16 asks 4k, 8k and 16k), 16 sequences of 512 new tokens (one
    // 8,192-token step of the batch-64 workload's prefill) and a chunk after history: with the kernel the
    // runtime chooses, then each kernel forced ("<name>_mma_sync", and on sm_90 "<name>_wgmma").
    using conveyor::PrefillAttentionKernel;
    std::vector<std::pair<PrefillAttentionKernel, std::string>> kernels = {{PrefillAttentionKernel::kAuto, ""},
                                                                           {PrefillAttentionKernel::kMmaSync, "_mma_sync"}};
    int dev = 0;
    cudaDeviceProp prop{};
    CONVEYOR_CUDA_CHECK(cudaGetDevice(&dev));
    CONVEYOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    if (prop.major == 9 && prop.minor == 0) kernels.push_back({PrefillAttentionKernel::kWgmma, "_wgmma"});
    for (const auto& [kernel, suffix] : kernels) {
      conveyor::set_prefill_attention_kernel(kernel);
      for (int n : {2048, 4096, 8192, 16384}) {
        all.push_back(conveyor::run("prefill_" + std::to_string(n) + suffix, 1, 0, n).json);
        std::printf("%s\n", all.back().c_str());
      }
      all.push_back(conveyor::run("prefill_16x512" + suffix, 16, 0, 512).json);
      std::printf("%s\n", all.back().c_str());
      all.push_back(conveyor::run("prefill_chunk_512_after_3584" + suffix, 1, 3584, 512).json);
      std::printf("%s\n", all.back().c_str());
    }
    conveyor::set_prefill_attention_kernel(PrefillAttentionKernel::kAuto);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << "[\n";
    for (size_t i = 0; i < all.size(); ++i) f << "  " << all[i] << (i + 1 < all.size() ? ",\n" : "\n");
    f << "]\n";
    if (!f) {
      std::fprintf(stderr, "attention_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
