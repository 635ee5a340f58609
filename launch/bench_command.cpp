// `conveyor bench throughput|latency`: synthetic runs like `vllm bench throughput|latency` on any pp x tp
// layout under mpirun/srun (the leader drives the engine, the other ranks serve). Prompts are random
// token ids from runtime.seed; EOS is ignored and decoding is greedy, so every request produces exactly
// its max_tokens. Rank 0 prints the result block to stdout (vLLM's lines in vLLM's order first) and
// writes --output-json with vLLM's field names plus the layout, per-stage usage, TTFT/TPOT, KV and
// preemptions, peak memory and the roofline share against the device it ran on.
#include <sys/resource.h>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launch/command.h"
#include "launch/pipeline_session.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "runtime/core/percentile.h"
#include "runtime/core/strings.h"
#include "runtime/dist/device.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/request.h"
#include "runtime/model/spec.h"
#include "stages/cpu_ceilings.h"
#include "stages/gpu_peaks.h"
#include "stages/partitioner.h"
#include "stages/pipeline_stage.h"
#include "stages/stage_options.h"
#include "stages/step_anatomy.h"

namespace po = boost::program_options;
using nlohmann::json;

namespace conveyor {
namespace {

po::options_description make_options() {
  po::options_description desc("conveyor bench options");
  desc.add_options()("help,h", "show this help")("input-len", po::value<int64_t>(), "prompt tokens per request")(
      "output-len", po::value<int64_t>(), "generated tokens per request (EOS ignored)")(
      "num-prompts", po::value<int64_t>()->default_value(1000), "throughput: requests")(
      "random-range-ratio", po::value<double>()->default_value(0.0),
      "throughput: lengths drawn from len * [1 - R, 1 + R]")(
      "batch-size", po::value<int64_t>()->default_value(8), "latency: requests per timed batch")(
      "num-iters-warmup", po::value<int64_t>()->default_value(10), "latency: untimed batches first")(
      "num-iters", po::value<int64_t>()->default_value(30), "latency: timed batches")(
      "output-json", po::value<std::string>(), "write the results here (rank 0)")(
      "step-timeline", po::value<std::string>(),
      "write every step's host and device phases here (rank 0, JSON) and print where a decode step's time goes");
  add_config_options(&desc);
  return desc;
}

struct BenchSpec {
  std::string mode;  // "throughput" or "latency"
  int64_t input_len = 0, output_len = 0, num_prompts = 0, batch_size = 0, warmup = 0, iters = 0;
  double ratio = 0;
};

BenchSpec bench_spec(const std::string& mode, const po::variables_map& vm) {
  BenchSpec b;
  b.mode = mode;
  CONVEYOR_CHECK(vm.count("input-len") && vm.count("output-len"), "conveyor bench ", mode,
                 " needs --input-len N and --output-len M");
  b.input_len = vm["input-len"].as<int64_t>();
  b.output_len = vm["output-len"].as<int64_t>();
  b.num_prompts = vm["num-prompts"].as<int64_t>();
  b.ratio = vm["random-range-ratio"].as<double>();
  b.batch_size = vm["batch-size"].as<int64_t>();
  b.warmup = vm["num-iters-warmup"].as<int64_t>();
  b.iters = vm["num-iters"].as<int64_t>();
  CONVEYOR_CHECK(b.input_len >= 1 && b.output_len >= 1, "--input-len and --output-len must be >= 1");
  CONVEYOR_CHECK(b.ratio >= 0 && b.ratio < 1, "--random-range-ratio must be in [0, 1), got ", b.ratio);
  CONVEYOR_CHECK(b.num_prompts >= 1 && b.batch_size >= 1 && b.iters >= 1 && b.warmup >= 0,
                 "--num-prompts, --batch-size and --num-iters must be >= 1 and --num-iters-warmup >= 0");
  CONVEYOR_CHECK(mode == "throughput" || !vm.count("random-range-ratio") || vm["random-range-ratio"].defaulted(),
                 "--random-range-ratio applies to throughput mode only");
  return b;
}

// Uniform in [floor(n (1 - r)), ceil(n (1 + r))], at least 1, as vLLM's random dataset draws lengths.
int64_t random_len(std::mt19937_64& rng, int64_t n, double r) {
  const auto lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(n * (1.0 - r))));
  const auto hi = std::max<int64_t>(lo, static_cast<int64_t>(std::ceil(n * (1.0 + r))));
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

std::vector<Request> random_requests(std::mt19937_64& rng, const BenchSpec& b, int64_t count, double ratio,
                                     int64_t vocab, int64_t max_model_len, int64_t first_id) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<Request> out;
  for (int64_t i = 0; i < count; ++i) {
    Request r;
    r.id = first_id + i;
    r.index = static_cast<uint64_t>(r.id);
    r.label = "bench request " + std::to_string(r.id);
    r.prompt_ids.resize(static_cast<size_t>(random_len(rng, b.input_len, ratio)));
    for (int32_t& t : r.prompt_ids) t = token(rng);
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = random_len(rng, b.output_len, ratio);
    const int64_t len = static_cast<int64_t>(r.prompt_ids.size()) + r.params.max_tokens;
    CONVEYOR_CHECK(len <= max_model_len, r.label, " needs ", r.prompt_ids.size(), " prompt + ", r.params.max_tokens,
                   " output tokens = ", len, " positions but max_model_len is ", max_model_len,
                   "; lower --input-len/--output-len/--random-range-ratio or raise --max-model-len");
    out.push_back(std::move(r));
  }
  return out;
}

// One request as the leader saw it, in seconds since its run began (all requests are submitted at 0).
struct RequestTimes {
  int64_t prompt = 0, output = 0;
  double first_token_s = -1, done_s = -1;
};

struct TimedRun {
  double elapsed_s = 0;
  std::vector<RequestTimes> requests;
};

// Runs the requests to completion. A token is timed when the engine step that returns it ends: after
// each step, requests still without a first token are checked for one (in the scheduler's sequence);
// a finished request's last token is timed when step() hands back its output.
TimedRun run_timed(Engine& engine, std::vector<Request> requests) {
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const int64_t first_id = requests.front().id;
  TimedRun run;
  run.requests.resize(requests.size());
  std::vector<int64_t> waiting_first;
  for (Request& r : requests) {
    run.requests[static_cast<size_t>(r.id - first_id)].prompt = static_cast<int64_t>(r.prompt_ids.size());
    waiting_first.push_back(r.id);
    engine.add_request(std::move(r));
  }
  while (engine.has_unfinished()) {
    const std::vector<CompletionOutput> finished = engine.step();
    const double t = since();
    const Scheduler& sched = engine.scheduler();
    waiting_first.erase(std::remove_if(waiting_first.begin(), waiting_first.end(), [&](int64_t id) {
      if (!sched.contains(id) || sched.sequence(id).output_ids.empty()) return false;
      run.requests[static_cast<size_t>(id - first_id)].first_token_s = t;
      return true;
    }), waiting_first.end());
    for (const CompletionOutput& out : finished) {
      CONVEYOR_CHECK(out.finish_reason != FinishReason::kError, "bench request ", out.request_id, " failed: ", out.error);
      RequestTimes& rt = run.requests[static_cast<size_t>(out.request_id - first_id)];
      rt.output = out.completion_tokens;
      rt.done_s = t;
      if (rt.first_token_s < 0) rt.first_token_s = t;  // its only step both started and ended it
    }
  }
  run.elapsed_s = since();
  return run;
}

json distribution(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return {{"count", v.size()}, {"mean", v.empty() ? 0.0 : sum / static_cast<double>(v.size())},
          {"p50", percentile(v, 0.5)}, {"p90", percentile(v, 0.9)}, {"p99", percentile(v, 0.99)}};
}

// TTFT = first token - submit; TPOT = (last token - first token) / (output - 1), for outputs > 1.
json ttft_tpot(const std::vector<TimedRun>& runs) {
  std::vector<double> ttft, tpot;
  for (const TimedRun& run : runs) {
    for (const RequestTimes& r : run.requests) {
      ttft.push_back(r.first_token_s);
      if (r.output > 1) tpot.push_back((r.done_s - r.first_token_s) / static_cast<double>(r.output - 1));
    }
  }
  return {{"ttft_s", distribution(ttft)}, {"tpot_s", distribution(tpot)}};
}

// The device a roofline is drawn against: on the CPU backend this host's measured ceilings (fp32
// weights and KV, as the CPU backend runs), on CUDA the planner's peaks of the GPU the run is on
// (gpu_peaks.h; bf16), the H200's where that GPU is not known there.
struct RooflineDevice {
  std::string name;
  double flops = 0, bandwidth = 0, dtype_bytes = 2;
};

RooflineDevice roofline_device(Backend backend, const std::string& gpu_name) {
  if (backend == Backend::kCpu) {
    const CpuCeilings c = measure_cpu_ceilings();
    char name[160];
    std::snprintf(name, sizeof name, "this host's CPU (measured: %.1f GB/s triad, %.1f GFLOP/s matmul_ref, fp32)",
                  c.bandwidth / 1e9, c.flops / 1e9);
    return {name, c.flops, c.bandwidth, 4};
  }
  if (const GpuPeaks* g = find_gpu_peaks(gpu_name)) return {std::string(g->label) + " peaks (bf16)", g->flops, g->bandwidth, 2};
  return {"H200 peaks (bf16; assumed for " + gpu_name + ")", kH200Peaks.flops, kH200Peaks.bandwidth, 2};
}

// The run's lower bound on `dev` (see docs/bench.md): model FLOPs and bytes of an ideal run of the same
// requests over all ranks' combined ceilings; share = that time / the measured time.
json roofline(const ModelSpec& s, const TimedRun& run, double elapsed_s, int gpus, int64_t max_num_seqs,
              const RooflineDevice& dev, bool kv_fp8) {
  const double kDtypeBytes = dev.dtype_bytes;
  // On a GPU, FP8 linears keep 1-byte layer weights and run at twice the 16-bit tensor-core rate (the
  // FP8 GEMM ceiling); an FP8 KV cache stores 1-byte K and V. The CPU backend computes in fp32.
  const bool gpu = kDtypeBytes == 2, fp8_linears = gpu && s.quant.fp8_linears();
  const double layer_weight_bytes = fp8_linears ? 1.0 : kDtypeBytes, linear_rate = fp8_linears ? 2.0 : 1.0;
  const double kv_elem_bytes = gpu && kv_fp8 ? 1.0 : kDtypeBytes;
  const double L = static_cast<double>(s.layers);
  const double head_params = static_cast<double>(s.vocab) * s.hidden;
  const double weight_bytes = L * layer_params(s) * layer_weight_bytes + head_params * kDtypeBytes;  // per pass
  const double kv_per_token = L * 2.0 * s.kv_heads * s.head_dim * kv_elem_bytes;
  double flops = 0, kv_bytes = 0, decode_tokens = 0, output_tokens = 0, bf16_equiv_flops = 0;
  for (const RequestTimes& r : run.requests) {
    const double p = static_cast<double>(r.prompt), o = static_cast<double>(r.output);
    const double fed = p + o - 1;  // the last output is never fed back
    const double linear = 2.0 * L * layer_params(s) * fed;
    const double rest = 2.0 * head_params * o + L * 4.0 * s.heads * s.head_dim * fed * (fed + 1) / 2;  // attention: token j sees j + 1 keys
    flops += linear + rest;
    bf16_equiv_flops += linear / linear_rate + rest;
    kv_bytes += kv_per_token * ((o - 1) * p + (o - 1) * o / 2);    // decode i (1..o-1) reads p + i positions
    decode_tokens += o - 1;
    output_tokens += o;
  }
  const double batch = static_cast<double>(std::min<int64_t>(max_num_seqs, static_cast<int64_t>(run.requests.size())));
  const double waves = std::ceil(static_cast<double>(run.requests.size()) / batch);
  const double passes = std::ceil(decode_tokens / batch) + waves;  // full-batch decode steps + one prefill per wave
  const double compute_s = bf16_equiv_flops / (gpus * dev.flops);
  const double memory_s = (passes * weight_bytes + kv_bytes) / (gpus * dev.bandwidth);
  const double t = std::max(compute_s, memory_s);
  return {{"device", dev.name}, {"peak_tflops_per_gpu", dev.flops / 1e12},
          {"peak_bandwidth_tb_s_per_gpu", dev.bandwidth / 1e12}, {"gpus", gpus}, {"dtype_bytes", kDtypeBytes}, {"layer_weight_bytes", layer_weight_bytes},
          {"kv_dtype_bytes", kv_elem_bytes}, {"model_flops", flops}, {"weight_bytes_per_pass", weight_bytes},
          {"weight_passes", passes}, {"kv_read_bytes", kv_bytes}, {"compute_time_s", compute_s},
          {"memory_time_s", memory_s}, {"time_s", t}, {"bound", compute_s > memory_s ? "compute" : "memory"},
          {"output_tokens_per_s", output_tokens / t}, {"share", t / elapsed_s},
          {"method", "ideal run of the same requests at batch min(max_num_seqs, requests) over all GPUs: "
                     "max(FLOPs / (gpus * peak FLOP/s), (weight passes * weight bytes + KV read) / (gpus * peak "
                     "bandwidth)); FLOPs = 2 * layer params * fed tokens + 2 * LM head * outputs + attention "
                     "4 * heads * head_dim per (token, key); one weight pass per decode step and per prefill wave; "
                     "FP8 linears: 1-byte layer weights at twice the peak FLOP/s; FP8 KV: 1-byte K/V"}};
}

// Collective: every rank's peak resident host memory, on rank 0.
std::vector<long long> gather_peak_rss() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  long long mine = static_cast<long long>(ru.ru_maxrss) * 1024;  // Linux reports KiB
  int rank = 0, size = 1;
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  std::vector<long long> all(rank == 0 ? static_cast<size_t>(size) : 0);
  CONVEYOR_MPI_CHECK(MPI_Gather(&mine, 1, MPI_LONG_LONG, all.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  return all;
}

std::string command_line(const Args& args) {
  std::string line = "conveyor bench";
  for (const std::string& a : args)
    line += " " + (a.find_first_of(" \t\"'") == std::string::npos ? a : "'" + a + "'");
  return line;
}

struct Totals {
  int64_t requests = 0, prompt_tokens = 0, output_tokens = 0;
};

Totals totals(const TimedRun& run) {
  Totals t;
  for (const RequestTimes& r : run.requests) {
    ++t.requests;
    t.prompt_tokens += r.prompt;
    t.output_tokens += r.output;
  }
  return t;
}

// Throughput mode on the leader: vLLM's fields and summary line.
json run_throughput(Engine& engine, const BenchSpec& b, std::mt19937_64& rng, std::vector<TimedRun>* runs) {
  runs->push_back(run_timed(engine, random_requests(rng, b, b.num_prompts, b.ratio, engine.runner().spec().vocab,
                                                    engine.max_model_len(), 0)));
  const Totals t = totals(runs->back());
  const double e = runs->back().elapsed_s;
  const int64_t total = t.prompt_tokens + t.output_tokens;
  return {{"elapsed_time", e}, {"num_requests", t.requests}, {"total_num_tokens", total},
          {"requests_per_second", t.requests / e}, {"tokens_per_second", total / e},
          {"total_prompt_tokens", t.prompt_tokens}, {"total_output_tokens", t.output_tokens},
          {"output_tokens_per_second", t.output_tokens / e}};
}

// Latency mode on the leader: end-to-end time of a batch, warm-up batches untimed.
json run_latency(Engine& engine, const BenchSpec& b, std::mt19937_64& rng, std::vector<TimedRun>* runs) {
  const int64_t vocab = engine.runner().spec().vocab;
  int64_t next_id = 0;
  for (int64_t i = 0; i < b.warmup; ++i, next_id += b.batch_size)
    run_timed(engine, random_requests(rng, b, b.batch_size, 0.0, vocab, engine.max_model_len(), next_id));
  std::vector<double> latencies;
  for (int64_t i = 0; i < b.iters; ++i, next_id += b.batch_size) {
    runs->push_back(run_timed(engine, random_requests(rng, b, b.batch_size, 0.0, vocab, engine.max_model_len(), next_id)));
    latencies.push_back(runs->back().elapsed_s);
  }
  double sum = 0;
  for (double l : latencies) sum += l;
  const double avg = sum / static_cast<double>(latencies.size());
  json pct = json::object();
  for (int p : {10, 25, 50, 75, 90, 99}) pct[std::to_string(p)] = percentile(latencies, p / 100.0);
  const Totals t = totals(runs->back());
  return {{"avg_latency", avg}, {"latencies", latencies}, {"percentiles", pct}, {"batch_size", b.batch_size},
          {"num_iters", b.iters}, {"num_iters_warmup", b.warmup},
          {"output_tokens_per_second", static_cast<double>(t.output_tokens) / avg}};
}

// The result block on stdout, vLLM's lines first in vLLM's order, then what conveyor adds.
void print_result(const json& out, const std::optional<PipelineUsage>& usage) {
  if (out["mode"] == "throughput") {
    std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
                out["requests_per_second"].get<double>(), out["tokens_per_second"].get<double>(),
                out["output_tokens_per_second"].get<double>());
    std::printf("Total num prompt tokens:  %lld\nTotal num output tokens:  %lld\n",
                out["total_prompt_tokens"].get<long long>(), out["total_output_tokens"].get<long long>());
  } else {
    std::printf("Avg latency: %.6f seconds\n", out["avg_latency"].get<double>());
    for (const auto& [p, v] : out["percentiles"].items())
      std::printf("%s%% percentile latency: %.6f seconds\n", p.c_str(), v.get<double>());
  }
  if (usage) std::cout << format_usage(*usage) << std::flush;
  const json& r = out["roofline"];
  std::printf("TTFT p50 %.4f s, TPOT p50 %.4f s; %lld preemptions\nRoofline: %.1f%% of %s, %s-bound\n",
              out["ttft_s"]["p50"].get<double>(), out["tpot_s"]["p50"].get<double>(),
              out["kv_cache"]["preemptions"].get<long long>(), 100.0 * r["share"].get<double>(),
              r["device"].get<std::string>().c_str(), r["bound"].get<std::string>().c_str());
  std::fflush(stdout);
}

// --step-timeline: every stamp to `path`, the anatomy of a decode step printed; returns the anatomy.
json write_step_timeline(const StepStamps& stamps, const std::string& path) {
  const json anatomy = step_anatomy(stamps);
  json spans = json::array();
  for (const StepStamp& s : stamps.stamps())
    spans.push_back({{"step", s.step}, {"phase", s.phase}, {"side", s.device ? "device" : "host"},
                     {"begin_s", s.begin_s}, {"end_s", s.end_s}});
  json shapes = json::array();
  for (const auto& [step, shape] : stamps.shapes())
    shapes.push_back({{"step", step}, {"seqs", shape.seqs}, {"tokens", shape.tokens}, {"decode", shape.decode}});
  std::ofstream f(path);
  CONVEYOR_CHECK(f.good(), "cannot write --step-timeline ", path);
  f << json{{"anatomy", anatomy}, {"steps", shapes}, {"spans", spans}}.dump(1) << "\n";
  CONVEYOR_CHECK(f.good(), "writing --step-timeline ", path, " failed");
  std::cout << format_step_anatomy(anatomy) << std::flush;
  return anatomy;
}

// What a bench run adds to vLLM's fields (rank 0).
struct Details {
  const Config& cfg;
  const ModelSpec& spec;
  const PipelineSession& session;
  const Engine& engine;
  const BenchSpec& bench;
  const std::optional<PipelineUsage>& usage;
  const std::vector<long long>& rss;
  const std::vector<TimedRun>& runs;
  const Args& args;
};

void add_details(json& out, const Details& d) {
  const Config& cfg = d.cfg;
  const std::string& mode = d.bench.mode;
  const int gpus = d.session.world().world_size();
  const double elapsed = mode == "throughput" ? out["elapsed_time"].get<double>() : out["avg_latency"].get<double>();
  const std::vector<int64_t>& partition = d.session.partition();  // the split this run used
  const Layout& layout = d.session.world().layout();
  const ModelRunner& runner = d.engine.runner();
  out["mode"] = mode;
  out["layout"] = {{"data", layout.data}, {"pipeline", layout.pipeline}, {"tensor", layout.tensor},
                   {"micro_batches", runner.max_in_flight()}, {"partition", partition}};
  out["pipeline_usage"] = d.usage ? d.usage->to_json() : json();
  out.update(ttft_tpot(d.runs));
  out["kv_cache"] = {{"num_blocks", runner.num_kv_blocks()}, {"block_size", runner.block_size()},
                     {"dtype", cfg.get_string("cache.kv_cache_dtype")},
                     {"preemptions", d.engine.scheduler_stats().preemptions},
                     {"plans", d.engine.scheduler_stats().plans}};
  out["peak_memory"] = {{"host_max_rss_bytes", d.rss}};
  out["output_tokens_per_second_per_gpu"] = out["output_tokens_per_second"].get<double>() / gpus;
  const Backend backend = resolve_backend(cfg.get_string("runtime.backend"));
  const StageOptions opt = StageOptions::from_config(cfg);  // the model as the stages run it
  out["roofline"] = roofline(opt.quantized(d.spec), d.runs.back(), elapsed, gpus, d.session.batch().max_num_seqs,
                             roofline_device(backend, d.session.device_info().name), opt.kv_fp8());
  out["backend"] = backend_name(backend);
  out["model"] = {{"shape", d.spec.source}, {"load_format", cfg.get_string("model.load_format")},
                  {"dtype", cfg.get_string("model.dtype")}};
  out["workload"] = {{"input_len", d.bench.input_len}, {"output_len", d.bench.output_len},
                     {"seed", cfg.get_int("runtime.seed")},
                     {"random_range_ratio", mode == "throughput" ? d.bench.ratio : 0.0},
                     {"max_num_seqs", d.session.batch().max_num_seqs},
                     {"max_num_batched_tokens", d.session.batch().max_num_batched_tokens},
                     {"batch_from_memory", cfg.get_int("scheduler.max_num_seqs") == 0}};
  out["command_line"] = command_line(d.args);
}

}  // namespace

int run_bench_command(const Args& args, int* argc, char*** argv) {
  const po::options_description desc = make_options();
  po::options_description all;  // plus the positional mode, which --help does not list as an option
  all.add(desc).add_options()("mode", po::value<std::string>(), "throughput or latency");
  po::positional_options_description positional;
  positional.add("mode", 1);
  const po::variables_map vm = parse_command_line(args, all, &positional);
  if (vm.count("help") || !vm.count("mode")) {
    std::cout << "usage: conveyor bench throughput --input-len N --output-len M [--num-prompts P] "
                 "[--random-range-ratio R] [--output-json F] [config options]\n"
                 "       conveyor bench latency --input-len N --output-len M [--batch-size B] "
                 "[--num-iters-warmup W] [--num-iters K] [--output-json F] [config options]\n"
                 "Model: --model PATH, or --load-format dummy --set model.config=configs/models/<name>.yaml\n\n"
              << desc;
    return vm.count("help") ? 0 : 2;
  }
  const std::string mode = vm["mode"].as<std::string>();
  CONVEYOR_CHECK(mode == "throughput" || mode == "latency", "unknown bench mode '", mode, "'",
                 did_you_mean(mode, {"throughput", "latency"}), "; use throughput or latency");
  const BenchSpec b = bench_spec(mode, vm);
  const Config cfg = config_from_options(vm);
  const bool dummy = cfg.get_string("model.load_format") == "dummy";
  const std::string model_path = cfg.get_string("model.path");
  CONVEYOR_CHECK(!model_path.empty() || (dummy && !cfg.get_string("model.config").empty()),
                 "no model given; pass --model <hf-dir|file.gguf> (or --load-format dummy with --set model.config=...)");
  const ModelSpec spec = load_model_spec(model_path.empty() ? cfg.get_string("model.config") : model_path);

  CONVEYOR_CHECK(cfg.get_int("parallel.data") == 1, "conveyor bench measures one replica: drop -dp (parallel.data = ",
                 cfg.get_int("parallel.data"), "); replicas are independent, so throughput scales with their number");
  PipelineSession session(cfg, argc, argv);
  session.start(cfg, spec, b.input_len + b.output_len);
  const std::string trace = cfg.get_string("logging.trace");
  if (!session.is_leader()) {
    session.serve();
    session.finish(trace);
    gather_peak_rss();
    return 0;
  }
  // Prompts are ids, so no tokenizer: nothing is detokenized during the timed run.
  Engine engine(session.make_runner(), nullptr, session.engine_options(cfg));
  const std::string step_timeline = vm.count("step-timeline") ? vm["step-timeline"].as<std::string>() : "";
  if (!step_timeline.empty()) engine.set_step_stamps(session.enable_step_stamps());
  std::mt19937_64 rng(static_cast<uint64_t>(cfg.get_int("runtime.seed")));
  std::vector<TimedRun> runs;
  json out = mode == "throughput" ? run_throughput(engine, b, rng, &runs) : run_latency(engine, b, rng, &runs);
  std::fflush(stdout);
  engine.shutdown();
  const std::optional<PipelineUsage> usage = session.finish(trace);
  const std::vector<long long> rss = gather_peak_rss();

  add_details(out, Details{cfg, spec, session, engine, b, usage, rss, runs, args});
  print_result(out, usage);
  if (!step_timeline.empty()) out["step_timeline"] = write_step_timeline(*session.step_stamps(), step_timeline);
  if (vm.count("output-json")) {
    const std::string path = vm["output-json"].as<std::string>();
    std::ofstream f(path);
    CONVEYOR_CHECK(f.good(), "cannot write --output-json ", path);
    f << out.dump(2) << "\n";
    CONVEYOR_CHECK(f.good(), "writing --output-json ", path, " failed");
  }
  if (!trace.empty()) std::cerr << "trace written to " << trace << "\n";
  return 0;
}

}  // namespace conveyor
