// Device measurements for `conveyor doctor` (see stages/kernel_probe.h). Inputs are random bf16 values (zeros
// would flatter the tensor cores' power draw); small GEMM weights rotate over a 1 GiB pool so no call
// finds them in L2. Timings are medians of samples of back-to-back calls between CUDA events, the way
// the runtime issues them, after a warm-up that also lets GemmRunner autotune each shape.
#include "stages/kernel_probe.h"

#include <cstdio>
#include <sstream>

#include "stages/device_profile.h"

#ifdef CONVEYOR_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/gemm.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"
#include "runtime/core/event_timing.h"
#endif

namespace conveyor {

#ifdef CONVEYOR_WITH_CUDA
namespace {

// Llama-3-8B's attention per rank (and 70B's at tp=8): 32 query heads over 8 KV heads of 128.
constexpr int kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;
constexpr size_t kPoolBytes = size_t(1) << 30;
constexpr int kGraphKernels = 200;

// Copies a 16 MiB host chunk over the buffer's `bytes`, repeated.
void fill_with(Device& dev, void* p, size_t bytes, const void* chunk, size_t chunk_bytes) {
  for (size_t off = 0; off < bytes; off += chunk_bytes)
    dev.copy_from_host(static_cast<char*>(p) + off, chunk, std::min(chunk_bytes, bytes - off));
}

void fill_random(Device& dev, void* p, size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> chunk(size_t(8) << 20);
  for (auto& x : chunk) x = float_to_bf16(u(rng));
  fill_with(dev, p, bytes, chunk.data(), chunk.size() * 2);
}

// Random e4m3 codes, NaN codes (0x7f, 0xff) replaced.
void fill_codes(Device& dev, void* p, size_t bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> chunk(size_t(16) << 20);
  for (auto& x : chunk) {
    x = static_cast<uint8_t>(rng() & 0xff);
    if ((x & 0x7f) == 0x7f) x ^= 1;
  }
  fill_with(dev, p, bytes, chunk.data(), chunk.size());
}

// Median seconds of one call (runtime/core/event_timing.h), 15 samples by default.
template <typename Fn>
double median_s(Fn&& fn, cudaStream_t s, int samples = 15, int calls = 10) {
  return 1e-6 * median_us(std::forward<Fn>(fn), s, samples, calls);
}

struct GemmBench {
  Device& dev;
  cudaStream_t stream;
  DeviceBuffer workspace;  // before gemm: outlives it; no accumulating shapes, so cuBLASLt's part only
  GemmRunner gemm;
  DeviceBuffer pool, x, y;
  GemmBench(Device& d, cudaStream_t s)
      : dev(d),
        stream(s),
        workspace(&d, gemm_workspace_bytes(0, 0)),
        gemm(workspace.data(), workspace.bytes()),
        pool(&d, kPoolBytes),
        x(&d, size_t(128) << 20),
        y(&d, size_t(256) << 20) {
    fill_random(d, pool.data(), kPoolBytes, 17);
    fill_random(d, x.data(), x.bytes(), 3);
  }
  // Seconds per call of y[m, n] = x[m, k] w[n, k]^T, bf16 in and out.
  double time(int64_t m, int64_t n, int64_t k) {
    const size_t w_bytes = (size_t(n) * k * 2 + 255) / 256 * 256;
    const size_t copies = std::max<size_t>(1, kPoolBytes / w_bytes);
    return median_s(
        [&](int i) {
          const char* w = static_cast<const char*>(pool.data()) + (size_t(i) % copies) * w_bytes;
          gemm.run(y.data(), DType::kBF16, x.data(), w, DType::kBF16, nullptr, m, n, k, stream);
        },
        stream);
  }
};

// (n, k) of the Llama-3 8B/70B projections per TP rank: k/v, q/o, qkv, gate/up, down; and the prefill shapes.
const std::vector<std::pair<int64_t, int64_t>> kDecodeShapes = {{1024, 4096}, {4096, 4096}, {6144, 4096},
                                                               {28672, 4096}, {4096, 14336}, {1024, 8192},
                                                               {8192, 8192}, {28672, 8192}, {8192, 28672}};
const std::vector<std::pair<int64_t, int64_t>> kPrefillShapes = {{6144, 4096}, {28672, 4096}, {4096, 14336}, {8192, 8192}};

// Per m in {1, 16, 64, 256}: seconds(m, n, k) over kDecodeShapes and the fit of time = fixed + bytes / bandwidth,
// bytes = (weights + x) * ab + y * 2, as DeviceProfile::gemm_time counts them.
template <typename Seconds>
nlohmann::json decode_buckets(Seconds&& seconds, double ab) {
  nlohmann::json buckets = nlohmann::json::array();
  for (int64_t m : {1, 16, 64, 256}) {
    nlohmann::json points = nlohmann::json::array();
    std::vector<std::pair<double, double>> fit;
    for (const auto& [n, k] : kDecodeShapes) {
      const double t = seconds(m, n, k), bytes = ab * (double(n) * k + double(m) * k) + 2.0 * m * n;
      points.push_back({{"n", n}, {"k", k}, {"bytes", bytes}, {"time_us", t * 1e6}, {"gbps", bytes / t / 1e9}});
      fit.emplace_back(bytes, t);
    }
    const LinearCost c = fit_linear_cost(fit);
    buckets.push_back({{"m", m}, {"fixed_us", c.fixed_s * 1e6}, {"bandwidth_gbps", c.bandwidth / 1e9}, {"points", points}});
  }
  return buckets;
}

// seconds(m, n, k) at m in {2048, 4096} over kPrefillShapes: the points and all FLOPs / all time.
template <typename Seconds>
std::pair<nlohmann::json, double> prefill_rate(Seconds&& seconds) {
  nlohmann::json points = nlohmann::json::array();
  double flops = 0, secs = 0;
  for (int64_t m : {2048, 4096})
    for (const auto& [n, k] : kPrefillShapes) {
      const double t = seconds(m, n, k), f = 2.0 * m * n * k;
      points.push_back({{"m", m}, {"n", n}, {"k", k}, {"time_us", t * 1e6}, {"tflops", f / t / 1e12}});
      flops += f, secs += t;
    }
  return {points, flops / secs};
}

nlohmann::json gemm_sections(Device& dev, cudaStream_t stream) {
  GemmBench b(dev, stream);
  auto seconds = [&](int64_t m, int64_t n, int64_t k) { return b.time(m, n, k); };
  const nlohmann::json buckets = decode_buckets(seconds, 2.0);
  const auto [prefill, rate] = prefill_rate(seconds);
  return {{"gemm_decode",
           {{"method", "GemmRunner (cuBLASLt, autotuned), bf16, y = x w^T for m in {1, 16, 64, 256} x 9 (n, k) of "
                       "Llama-3 8B/70B; weights rotate over 1 GiB (no L2 hits); median of 15 samples of 10 calls; per m "
                       "a least-squares fit (weights 1/t^2) of time = fixed + bytes / bandwidth, bytes = weights + x + y"},
            {"buckets", buckets}}},
          {"gemm_prefill",
           {{"method", "GemmRunner, bf16, m in {2048, 4096} x 4 (n, k); tflops = all FLOPs / all time"},
            {"tflops", rate / 1e12}, {"points", prefill}}}};
}

// An FP8 linear as stages/cuda/cuda_fp8_linear.cpp runs it at m rows of bf16 x: the per-token quantizer, then
// cuBLASLt e4m3 with the scales fused (where cuBLASLt can) or the fp32 GEMM and the epilogue kernel, the
// faster of the two (the runner's race keeps the faster too). Weights: random codes rotating over 1 GiB.
struct Fp8Bench {
  cudaStream_t stream;
  DeviceBuffer workspace;  // before gemm: outlives it
  Fp8GemmRunner gemm;
  DeviceBuffer pool, w_scale, x, codes, x_scale, acc, y;
  Fp8Bench(Device& d, cudaStream_t s)
      : stream(s),
        workspace(&d, gemm_workspace_bytes(0, 0)),
        gemm(workspace.data(), workspace.bytes()),
        pool(&d, kPoolBytes),
        w_scale(&d, 32768 * sizeof(float)),
        x(&d, size_t(128) << 20),       // bf16 [4096, 14336] at most
        codes(&d, size_t(64) << 20),
        x_scale(&d, 4096 * sizeof(float)),
        acc(&d, size_t(480) << 20),     // fp32 [4096, 28672]
        y(&d, size_t(256) << 20) {
    fill_codes(d, pool.data(), kPoolBytes, 19);
    fill_random(d, x.data(), x.bytes(), 7);
    const std::vector<float> scales(32768, 1.f / 448);
    d.copy_from_host(w_scale.data(), scales.data(), scales.size() * sizeof(float));
  }
  double time(int64_t m, int64_t n, int64_t k) {
    const size_t w_bytes = (size_t(n) * k + 255) / 256 * 256;
    const size_t copies = std::max<size_t>(1, kPoolBytes / w_bytes);
    auto w = [&](int i) { return static_cast<const uint8_t*>(pool.data()) + (size_t(i) % copies) * w_bytes; };
    auto* q = static_cast<uint8_t*>(codes.data());
    auto* xs = static_cast<float*>(x_scale.data());
    auto* sums = static_cast<float*>(acc.data());
    const auto* ws = static_cast<const float*>(w_scale.data());
    auto fused = [&](int i) {
      return gemm.run_scaled(y.data(), DType::kBF16, q, xs, w(i), ws, nullptr, DType::kBF16, m, n, k, false, stream);
    };
    const double quantize = median_s(
        [&](int) { quantize_rows_fp8_cuda(q, xs, x.data(), DType::kBF16, m, k, 0.f, stream); }, stream);
    const double unfused = median_s(
        [&](int i) {
          gemm.run(sums, q, w(i), m, n, k, stream);
          fp8_scale_epilogue_cuda(y.data(), DType::kBF16, sums, xs, ws, nullptr, DType::kBF16, m, n, false, stream);
        },
        stream);
    const double scaled = fused(0) ? median_s([&](int i) { fused(i); }, stream) : unfused;
    return quantize + std::min(scaled, unfused);
  }
};

// FP8 (e4m3) needs sm_89 or newer.
bool fp8_gemm_capable(int device) {
  cudaDeviceProp prop{};
  CONVEYOR_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.major * 10 + prop.minor >= 89;
}

nlohmann::json gemm_fp8_section(Device& dev, cudaStream_t stream) {
  Fp8Bench b(dev, stream);
  auto seconds = [&](int64_t m, int64_t n, int64_t k) { return b.time(m, n, k); };
  nlohmann::json buckets = decode_buckets(seconds, 1.0);
  const auto [prefill, rate] = prefill_rate(seconds);
  return {{"method", "an FP8 linear as --quantization fp8 runs it: quantize_rows_fp8_cuda (per token) + Fp8GemmRunner, "
                     "the faster of the fused scales (run_scaled) and fp32 + fp8_scale_epilogue_cuda; bf16 x and y, "
                     "e4m3 weights rotating over 1 GiB; the gemm_decode shapes and fit with bytes = weights + x at one "
                     "byte + y; prefill_tflops over the gemm_prefill shapes"},
          {"buckets", buckets},
          {"prefill_tflops", rate / 1e12},
          {"prefill_points", prefill}};
}

// Seconds of paged_attention_cuda for `batch` sequences with `history` cached and `fresh` new tokens, over
// a bf16 cache or (fp8) an e4m3 one with unit scales.
double attention_time(Device& dev, cudaStream_t stream, int batch, int history, int fresh, bool fp8 = false) {
  const int ctx = history + fresh, per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  const PagedKvShape shape{batch * per_seq, kBlockSize, kKvHeads, kHeadDim};
  std::vector<int32_t> ids(shape.num_blocks), starts{0}, positions;
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));  // blocks scattered over the pool, as in serving
  for (int s = 0; s < batch; ++s) {
    for (int p = history; p < ctx; ++p) positions.push_back(p);
    starts.push_back(starts.back() + fresh);
  }
  const int tokens = starts.back();
  const size_t act = size_t(tokens) * kHeads * kHeadDim * 2;
  const size_t kv_elem = fp8 ? 1 : 2;
  DeviceBuffer kc(&dev, shape.layer_elems() * kv_elem), vc(&dev, shape.layer_elems() * kv_elem), q(&dev, act),
      out(&dev, act);
  DeviceBuffer qs(&dev, starts.size() * 4), pos(&dev, positions.size() * 4), tab(&dev, ids.size() * 4);
  DeviceBuffer ws(&dev, paged_attention_workspace_bytes(tokens, kHeads, kHeadDim, ctx));
  if (fp8) {
    fill_codes(dev, kc.data(), kc.bytes(), 1);
    fill_codes(dev, vc.data(), vc.bytes(), 2);
  } else {
    fill_random(dev, kc.data(), kc.bytes(), 1);
    fill_random(dev, vc.data(), vc.bytes(), 2);
  }
  fill_random(dev, q.data(), q.bytes(), 3);
  dev.copy_from_host(qs.data(), starts.data(), qs.bytes());
  dev.copy_from_host(pos.data(), positions.data(), pos.bytes());
  dev.copy_from_host(tab.data(), ids.data(), tab.bytes());
  AttentionBatchCuda b;
  b.num_seqs = batch;
  b.num_tokens = tokens;
  b.query_start = static_cast<const int32_t*>(qs.data());
  b.positions = static_cast<const int32_t*>(pos.data());
  b.block_tables = static_cast<const int32_t*>(tab.data());
  b.max_blocks_per_seq = per_seq;
  b.max_query_len = fresh;
  b.max_context_len = ctx;
  const AttentionParams p{kHeads, 1.f / std::sqrt(float(kHeadDim)), 0};
  const KvCacheFormat fmt{fp8, KvScales{1.f, 1.f}};
  return median_s(
      [&](int) {
        paged_attention_cuda(out.data(), q.data(), kc.data(), vc.data(), b, shape, p, ws.data(), DType::kBF16, stream,
                             fmt);
      },
      stream, 15, 5);
}

// Decode attention at batch {1, 16, 64} x context {512, 4096} over a bf16 or (fp8) an e4m3 cache, fitted
// to time = fixed + KV bytes / bandwidth.
nlohmann::json decode_section(Device& dev, cudaStream_t stream, bool fp8) {
  nlohmann::json points = nlohmann::json::array();
  std::vector<std::pair<double, double>> fit;
  for (int batch : {1, 16, 64})
    for (int ctx : {512, 4096}) {
      const double t = attention_time(dev, stream, batch, ctx - 1, 1, fp8);
      const double bytes = 2.0 * batch * ctx * kKvHeads * kHeadDim * (fp8 ? 1 : 2);
      points.push_back({{"batch", batch}, {"context", ctx}, {"bytes", bytes}, {"time_us", t * 1e6}, {"gbps", bytes / t / 1e9}});
      fit.emplace_back(bytes, t);
    }
  const LinearCost c = fit_linear_cost(fit);
  return {{"method", std::string("paged_attention_cuda, bf16 queries over a ") + (fp8 ? "fp8_e4m3" : "bf16") +
                         " cache, 32 query / 8 KV heads of 128, block 16 scattered, one new token per sequence, batch "
                         "{1, 16, 64} x context {512, 4096}; median of 15 samples of 5 calls; fit (weights 1/t^2) of "
                         "time = fixed + KV bytes / bandwidth"},
          {"fixed_us", c.fixed_s * 1e6},
          {"bandwidth_gbps", c.bandwidth / 1e9},
          {"points", points}};
}

nlohmann::json attention_sections(Device& dev, cudaStream_t stream) {
  nlohmann::json prefill = nlohmann::json::array();
  double flops = 0, secs = 0;
  // The 8,192-token prompt is issue 16's yardstick (attention_bench's prefill_8192); the rate the planner
  // uses stays the two workload-sized points'.
  for (const auto& [history, fresh] : std::vector<std::pair<int, int>>{{0, 2048}, {1536, 512}, {0, 8192}}) {
    const double t = attention_time(dev, stream, 1, history, fresh);
    double pairs = 0;
    for (int i = 0; i < fresh; ++i) pairs += history + i + 1;
    const double f = 4.0 * pairs * kHeads * kHeadDim;
    const bool in_rate = fresh != 8192;
    prefill.push_back({{"history", history}, {"new", fresh}, {"time_us", t * 1e6}, {"tflops", f / t / 1e12},
                       {"in_rate", in_rate}});
    if (in_rate) flops += f, secs += t;
  }
  return {{"attention_decode", decode_section(dev, stream, false)},
          {"attention_decode_fp8", decode_section(dev, stream, true)},
          {"attention_prefill",
           {{"method", "paged_attention_cuda, one sequence: 2048 new tokens, and 512 after 1536 cached; causal FLOPs "
                       "4 * heads * head_dim per (query, visible key); tflops = those FLOPs / their time (the 8192 "
                       "point is reported, not in the rate)"},
            {"kernel", prefill_attention_kernel_name()},
            {"tflops", flops / secs / 1e12},
            {"points", prefill}}}};
}

nlohmann::json graph_kernel_section(Device& dev, cudaStream_t stream) {
  DeviceBuffer a(&dev, 512), out(&dev, 512);
  fill_random(dev, a.data(), a.bytes(), 5);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CONVEYOR_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kGraphKernels; ++i) add_cuda(out.data(), a.data(), a.data(), 256, DType::kBF16, stream);
  CONVEYOR_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CONVEYOR_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double t = median_s([&](int) { CONVEYOR_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, stream, 15, 1);
  CONVEYOR_CUDA_CHECK(cudaGraphExecDestroy(exec));
  CONVEYOR_CUDA_CHECK(cudaGraphDestroy(graph));
  return {{"method", "one CUDA graph of 200 add_cuda launches on 256 bf16 elements (each kernel's fixed cost: "
                     "launch gap and a nearly empty body); median of 15 graph launches / 200"},
          {"kernels", kGraphKernels}, {"us", t / kGraphKernels * 1e6}};
}

}  // namespace
#endif

nlohmann::json measure_device(Device& device) {
#ifdef CONVEYOR_WITH_CUDA
  const DeviceInfo info = device.info();
  if (info.backend != Backend::kCuda) return nullptr;
  CONVEYOR_CUDA_CHECK(cudaSetDevice(info.index));
  cudaStream_t stream;
  CONVEYOR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  nlohmann::json j = {{"name", info.name}, {"index", info.index}, {"dtype", "bf16"},
                      {"memory_gib", static_cast<double>(info.total_memory) / (1ull << 30)}};
  j.update(gemm_sections(device, stream));
  if (fp8_gemm_capable(info.index)) {
    try {  // the bf16 ceilings stand without it: a failure is reported in the JSON, not fatal
      j["gemm_decode_fp8"] = gemm_fp8_section(device, stream);
    } catch (const Error& e) {
      j["gemm_decode_fp8_error"] = e.what();
      std::fprintf(stderr, "conveyor doctor: the FP8 linears were not measured: %s\n", e.what());
    }
  }
  j.update(attention_sections(device, stream));
  j["graph_kernel"] = graph_kernel_section(device, stream);
  CONVEYOR_CUDA_CHECK(cudaStreamSynchronize(stream));
  CONVEYOR_CUDA_CHECK(cudaStreamDestroy(stream));
  return j;
#else
  (void)device;
  return nullptr;
#endif
}

std::string format_device(const nlohmann::json& d) {
  if (d.is_null()) return "";
  std::ostringstream os;
  char line[256];
  os << "device ceilings (" << d.value("name", std::string("GPU")) << ", bf16; for conveyor plan --doctor-json):\n";
  for (const auto& b : d.at("gemm_decode").at("buckets")) {
    std::snprintf(line, sizeof(line), "  GEMM m=%-4lld %6.1f us + bytes / %6.0f GB/s\n", b.at("m").get<long long>(),
                  b.at("fixed_us").get<double>(), b.at("bandwidth_gbps").get<double>());
    os << line;
  }
  std::snprintf(line, sizeof(line), "  GEMM prefill       %6.1f TFLOP/s\n", d.at("gemm_prefill").at("tflops").get<double>());
  os << line;
  if (d.contains("gemm_decode_fp8")) {
    const auto& f = d.at("gemm_decode_fp8");
    for (const auto& b : f.at("buckets")) {
      std::snprintf(line, sizeof(line), "  FP8 linear m=%-4lld %6.1f us + bytes / %6.0f GB/s\n",
                    b.at("m").get<long long>(), b.at("fixed_us").get<double>(), b.at("bandwidth_gbps").get<double>());
      os << line;
    }
    std::snprintf(line, sizeof(line), "  FP8 linear prefill %6.1f TFLOP/s\n", f.at("prefill_tflops").get<double>());
    os << line;
  }
  for (const char* key : {"attention_decode", "attention_decode_fp8"}) {
    if (!d.contains(key)) continue;
    const auto& a = d.at(key);
    std::snprintf(line, sizeof(line), "  decode attention%s %6.1f us + KV bytes / %6.0f GB/s\n",
                  std::string(key) == "attention_decode" ? "   " : " FP8", a.at("fixed_us").get<double>(),
                  a.at("bandwidth_gbps").get<double>());
    os << line;
  }
  std::snprintf(line, sizeof(line), "  prefill attention  %6.1f TFLOP/s\n", d.at("attention_prefill").at("tflops").get<double>());
  os << line;
  std::snprintf(line, sizeof(line), "  kernel in a graph  %6.2f us\n", d.at("graph_kernel").at("us").get<double>());
  os << line;
  return os.str();
}

}  // namespace conveyor
