// The configuration schema: every key conveyor understands, its type, default and bounds.
// Adding a key here makes it valid in YAML, settable with --set, printed by `conveyor config --print`.
#include <limits>

#include "runtime/config/config.h"

namespace conveyor {

namespace {
using VT = ValueType;
constexpr double kInf = std::numeric_limits<double>::infinity();

KeySpec key(const char* path, VT type, const char* def, const char* help) {
  KeySpec k;
  k.path = path;
  k.type = type;
  k.default_text = def;
  k.help = help;
  return k;
}
KeySpec ranged(KeySpec k, double lo, double hi, bool lo_exclusive = false) {
  k.min = lo;
  k.max = hi;
  k.min_exclusive = lo_exclusive;
  return k;
}
KeySpec one_of(KeySpec k, std::vector<std::string> choices) {
  k.choices = std::move(choices);
  return k;
}

std::vector<KeySpec> model_and_parallel_keys() {
  return {
      // model
      key("model.path", VT::kString, "", "HF model directory or .gguf file"),
      key("model.config", VT::kString, "",
          "model shape for --load-format dummy: configs/models/*.yaml or a config.json"),
      key("model.tokenizer", VT::kString, "", "tokenizer.json or directory (default: the model's)"),
      one_of(key("model.load_format", VT::kString, "auto", "how weights are read"),
             {"auto", "safetensors", "gguf", "dummy"}),
      key("model.hash_weights", VT::kBool, "true",
          "hash every weight file while loading (XXH3-128, in the batch manifest; SHA-256 where published)"),
      key("model.check_finite", VT::kBool, "true", "refuse a weight tensor holding NaN or Inf"),
      one_of(key("model.dtype", VT::kString, "auto", "activation and weight dtype on the GPU"),
             {"auto", "bfloat16", "float16", "float32", "bf16", "fp16", "fp32", "half"}),
      one_of(key("model.quantization", VT::kString, "none",
                 "fp8: e4m3 layer linears (per-channel weights quantized at load, per-token activations); "
                 "an FP8 checkpoint is FP8 whatever this says"),
             {"none", "fp8"}),
      ranged(key("model.max_model_len", VT::kInt, "0", "context length limit (0: from the model)"), 0, 1 << 24),
      // parallel
      ranged(key("parallel.data", VT::kInt, "1", "data-parallel replicas"), 1, 1 << 16),
      ranged(key("parallel.pipeline", VT::kInt, "1", "pipeline stages"), 1, 1 << 12),
      ranged(key("parallel.tensor", VT::kInt, "1", "tensor-parallel ranks per stage"), 1, 1 << 10),
      key("parallel.partition", VT::kIntList, "[]", "layers per stage, e.g. [19, 21, 21, 19] (empty: planner)"),
      ranged(key("parallel.micro_batches", VT::kInt, "0", "micro-batches in flight (0: = pipeline)"), 0, 1024),
      key("parallel.device_profile", VT::kString, "",
          "`conveyor doctor --output-json` file the layer split is planned with (empty: the roofline)"),
      one_of(key("parallel.data_transport", VT::kString, "auto",
                 "GPU data plane per group: auto = nccl where the group's ranks are on distinct GPUs, else the "
                 "shared-GPU transport; staged = host-staged MPI over pinned buffers; ipc = CUDA IPC (not built yet)"),
             {"auto", "nccl", "staged", "ipc"}),
  };
}

std::vector<KeySpec> engine_keys() {
  return {
      // scheduler
      ranged(key("scheduler.max_num_seqs", VT::kInt, "0",
                 "sequences per step (0: as many sequences of the expected length as the KV room holds, "
                 "up to 1024 on a GPU and 256 on the CPU; said at start-up)"),
             0, 1 << 20),
      ranged(key("scheduler.max_num_batched_tokens", VT::kInt, "0",
                 "tokens per step (0: 8192, or max_num_seqs when larger)"),
             0, 1 << 24),
      key("scheduler.enable_chunked_prefill", VT::kBool, "true", "split long prompts into chunks"),
      // cache
      one_of(key("cache.block_size", VT::kInt, "16", "tokens per KV block"), {"8", "16", "32", "64", "128"}),
      ranged(key("cache.gpu_memory_utilization", VT::kFloat, "0.9", "share of GPU memory conveyor may use"),
             0.0, 1.0, true),
      ranged(key("cache.gpu_memory_utilization_per_rank", VT::kFloat, "0",
                 "share of GPU memory each rank may use (0: gpu_memory_utilization / ranks on that GPU)"),
             0.0, 1.0),
      one_of(key("cache.kv_cache_dtype", VT::kString, "auto",
                 "KV cache dtype: auto = the model dtype; fp8 = fp8_e4m3 codes with per-tensor k/v scales (the "
                 "checkpoint's k_scale/v_scale, else 1.0); fp8_e5m2, fp8_inc, fp8_ds_mla are refused"),
             {"auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}),
      key("cache.calculate_kv_scales", VT::kBool, "false",
          "FP8 KV cache: each layer's k/v scales from the first step's K and V (amax / 200, amax / 100, as vLLM's "
          "--calculate-kv-scales) instead of the checkpoint's or 1.0"),
      ranged(key("cache.num_blocks", VT::kInt, "0", "KV blocks per rank (0: from memory)"), 0, 1ll << 32),
      ranged(key("cache.cpu_kv_cache_space", VT::kFloat, "4", "GiB of host memory for KV on the CPU backend"),
             0.0, kInf, true),
      // sampling defaults (a request may override each)
      ranged(key("sampling.temperature", VT::kFloat, "1.0", "0 = greedy"), 0.0, 1e6),
      ranged(key("sampling.top_p", VT::kFloat, "1.0", "nucleus mass"), 0.0, 1.0, true),
      ranged(key("sampling.top_k", VT::kInt, "0", "keep the k most likely (0 or -1: off)"), -1, 1 << 24),
      ranged(key("sampling.min_p", VT::kFloat, "0.0", "drop tokens below min_p * p(max)"), 0.0, 1.0),
      ranged(key("sampling.max_tokens", VT::kInt, "0",
                 "most tokens to generate (0: no limit, until EOS, a stop or the context limit)"), 0, 1 << 24),
      ranged(key("sampling.min_tokens", VT::kInt, "0", "tokens before EOS/stop may end"), 0, 1 << 24),
      ranged(key("sampling.repetition_penalty", VT::kFloat, "1.0", "> 1 discourages repeats"), 0.0, 1e6, true),
      ranged(key("sampling.presence_penalty", VT::kFloat, "0.0", ""), -2.0, 2.0),
      ranged(key("sampling.frequency_penalty", VT::kFloat, "0.0", ""), -2.0, 2.0),
      key("sampling.ignore_eos", VT::kBool, "false", "keep generating past EOS"),
  };
}

std::vector<KeySpec> io_and_runtime_keys() {
  return {
      // io
      key("io.input", VT::kString, "", "requests JSONL"),
      key("io.output", VT::kString, "", "results JSONL (append, resumable)"),
      key("io.errors", VT::kString, "", "per-line errors JSONL (default: <output>.errors.jsonl)"),
      key("io.summary", VT::kString, "", "run summary JSON"),
      key("io.strict", VT::kBool, "false", "abort before work on any invalid input line"),
      ranged(key("io.fsync_interval", VT::kFloat, "2.0", "seconds between fsyncs of the output"), 0.0, 3600.0),
      // logging
      one_of(key("logging.level", VT::kString, "info", "log level"),
             {"trace", "debug", "info", "warn", "error"}),
      ranged(key("logging.progress_interval", VT::kFloat, "10", "seconds between progress lines (not a tty)"),
             0.0, 1e6, true),
      key("logging.trace", VT::kString, "", "write a Chrome/Perfetto trace here"),
      // runtime
      one_of(key("runtime.backend", VT::kString, "auto", "compute backend"), {"auto", "cpu", "cuda"}),
      ranged(key("runtime.seed", VT::kInt, "0", "global seed (dummy weights, default sampling seed)"), 0,
             9.2e18),
      one_of(key("runtime.fp8_gemv", VT::kString, "auto",
                 "FP8 linears of <= 16 tokens through the FP8 gemv kernel: auto (timed against cuBLASLt per "
                 "shape; batch 1 0.4-2.3% faster on an H100), off (cuBLASLt), on"),
             {"off", "auto", "on"}),
      key("runtime.gemm_warmup", VT::kBool, "true",
          "at start-up, run every GEMM shape of a stage at each tuning bucket up to max_num_batched_tokens "
          "(kernels/gemm_tuning.h), so that the run's steps time no cuBLASLt candidates (CUDA backend)"),
      key("runtime.cuda_graphs", VT::kBool, "true",
          "replay decode steps as CUDA graphs per batch bucket (tp = 1 stages); --enforce-eager turns it off"),
      ranged(key("runtime.profile_step", VT::kInt, "-1",
                 "bracket this step with cudaProfilerStart/Stop, for `ncu --profile-from-start off`; -1: never"),
             -1, 9.2e18),
      ranged(key("runtime.cpu_threads", VT::kInt, "0",
                 "OpenMP threads per rank (0: the CPUs Slurm or mpirun gave the rank, else the host's shared "
                 "by its ranks)"), 0, 1 << 16),
      ranged(key("runtime.watchdog_timeout", VT::kFloat, "300",
                 "seconds a blocking wait may take before the watchdog aborts the job; 0 disables"), 0.0, 1e7),
  };
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> all = model_and_parallel_keys();
  for (auto part : {engine_keys(), io_and_runtime_keys()}) all.insert(all.end(), part.begin(), part.end());
  return all;
}
}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

const KeySpec* find_key_spec(const std::string& path) {
  for (const auto& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

std::vector<std::string> config_key_paths() {
  std::vector<std::string> out;
  for (const auto& k : config_schema()) out.push_back(k.path);
  return out;
}

}  // namespace conveyor
