// CpuModelRunner and make_cpu_model_runner (see cpu_model_runner.h). Dynamic NTK rope: each sequence
// rotates its new tokens with seq_len = its last new position + 1, which is what transformers does
// for a whole-prompt prefill and for every decode step; a prefill split into chunks past
// max_position_embeddings therefore rotates earlier chunks with a smaller base than one prefill
// would (transformers itself does the same when fed chunks).
#include "stages/cpu_model_runner.h"

#include <cmath>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/log.h"
#include "runtime/model/weight_loader.h"
#include "stages/cpu_ops.h"

namespace conveyor {

CpuModelRunner::CpuModelRunner(const ModelSpec& spec, WeightSet&& weights, int num_blocks, int block_size,
                               std::unique_ptr<Ops> ops, bool kv_fp8)
    : spec_(spec), ops_(ops ? std::move(ops) : make_cpu_ops()) {
  CONVEYOR_CHECK(num_blocks > 0 && block_size > 0, "CPU runner: need at least one KV block of at least one token, got ",
                 num_blocks, " blocks of ", block_size);
  const WeightShare share = WeightShare::whole_model(spec);
  PagedKvShape shape;
  shape.num_blocks = num_blocks;
  shape.block_size = block_size;
  shape.n_kv_heads = static_cast<int>(spec.kv_heads);
  shape.head_dim = static_cast<int>(spec.head_dim);
  cache_ = ops_->make_kv_cache(0, static_cast<int>(spec.layers), shape, kv_fp8);
  stage_ = std::make_unique<StageModel>(spec_, share, std::move(weights), *ops_, *cache_, nullptr);
}

void CpuModelRunner::forward(const StepPlan& plan, std::vector<float>* logits) {
  CONVEYOR_CHECK(logits != nullptr, "CPU runner: forward needs a logits output");
  stage_->forward(plan, Tensor(), logits);
}

int cpu_kv_blocks(const StageOptions& opt, int layers, const PagedKvShape& kv, const std::string& what) {
  if (opt.num_blocks > 0) return static_cast<int>(opt.num_blocks);
  const double gib = opt.cpu_kv_cache_space_gib;
  const auto budget = static_cast<size_t>(gib * 1024.0 * 1024.0 * 1024.0);
  const size_t elem = opt.kv_elem_bytes(DType::kF32);
  const int blocks = KvCache::blocks_that_fit(budget, layers, opt.block_size, kv.n_kv_heads, kv.head_dim, elem);
  CONVEYOR_CHECK(blocks > 0, "cache.cpu_kv_cache_space = ", gib, " GiB holds no KV block of ", opt.block_size,
                 " tokens for ", what, " (one block takes ",
                 KvCache::bytes_per_block(layers, opt.block_size, kv.n_kv_heads, kv.head_dim, elem),
                 " bytes); raise cache.cpu_kv_cache_space or set cache.num_blocks");
  return blocks;
}

std::unique_ptr<LocalModelRunner> make_cpu_model_runner(const StageOptions& opt, const ModelSpec& model) {
  const ModelSpec spec = opt.quantized(model);
  WeightSet weights = open_share(spec, WeightShare::whole_model(spec), opt.weights);
  PagedKvShape kv;
  kv.n_kv_heads = static_cast<int>(spec.kv_heads);
  kv.head_dim = static_cast<int>(spec.head_dim);
  auto runner = std::make_unique<CpuModelRunner>(spec, std::move(weights),
                                                 cpu_kv_blocks(opt, static_cast<int>(spec.layers), kv, spec.source),
                                                 opt.block_size, nullptr, opt.kv_fp8());
  if (opt.calculate_kv_scales) runner->calculate_kv_scales();
  const std::string kv_line = runner->kv_cache_line();
  if (!kv_line.empty()) spdlog::info("{}", kv_line);
  return runner;
}

}  // namespace conveyor
