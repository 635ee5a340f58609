// The stage shape issue 5 builds on: every rank is one TP rank of a group spanning the world and
// holds the model as TWO StageModels (layers split in the middle, hidden states handed across), so
// tensor parallelism (all-reduces, vocab-parallel embedding, LM head all-gather, replicated KV heads
// when tp > kv heads) and the stage boundary are both exercised against the transformers goldens.
#include <gtest/gtest.h>
#include <mpi.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/dist/mpi_communicator.h"
#include "runtime/model/spec.h"
#include "runtime/model/weight_loader.h"
#include "stages/cpu_ops.h"
#include "stages/stage_model.h"
#include "tests/stages/runner_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

constexpr int kBlocks = 32;
constexpr int kBlockSize = 16;

// Two stages on one TP rank, presented as a ModelRunner so the test driver can run it.
class TwoStageRunner : public LocalModelRunner {
 public:
  TwoStageRunner(const ModelSpec& spec, std::shared_ptr<const WeightSource> source, Communicator& tp) : spec_(spec), ops_(make_cpu_ops()) {
    const int64_t mid = spec.layers / 2;
    for (int s = 0; s < 2; ++s) {
      WeightShare share;
      share.first_layer = s == 0 ? 0 : mid;
      share.last_layer = s == 0 ? mid : spec.layers;
      share.embedding = s == 0;
      share.final_norm = share.lm_head = s == 1;
      share.tp_rank = tp.rank();
      share.tp_size = tp.size();
      PagedKvShape shape{kBlocks, kBlockSize, static_cast<int>(std::max<int64_t>(1, spec.kv_heads / tp.size())),
                         static_cast<int>(spec.head_dim)};
      caches_[s] = std::make_unique<KvCache>(static_cast<int>(share.first_layer),
                                             static_cast<int>(share.last_layer - share.first_layer), shape);
      stages_[s] = std::make_unique<StageModel>(spec_, share, WeightLoader(spec_, source).load_share(share), *ops_,
                                                *caches_[s], &tp);
    }
  }
  const ModelSpec& spec() const override { return spec_; }
  int num_kv_blocks() const override { return kBlocks; }
  int block_size() const override { return kBlockSize; }
  void forward(const StepPlan& plan, std::vector<float>* logits) override {
    Tensor hidden = stages_[0]->forward(plan, Tensor(), nullptr);
    // What the pipeline sends: the hidden states, through host memory.
    std::vector<float> wire(static_cast<size_t>(hidden.view().numel()));
    ops_->download(hidden.view(), wire.data());
    Tensor received = ops_->upload(wire.data(), hidden.rows(), hidden.cols());
    stages_[1]->forward(plan, received, logits);
  }

 private:
  ModelSpec spec_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<KvCache> caches_[2];
  std::unique_ptr<StageModel> stages_[2];
};

class TensorParallelGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelGolden, TwoStagesOverTpMatchTransformers) {
  const std::string dir = testing::data_path("goldens/" + GetParam());
  ModelSpec spec = load_model_spec(dir);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MpiCommunicator tp(dup, "tp group (world)");
  ASSERT_EQ(spec.heads % tp.size(), 0) << "pick goldens whose heads divide the rank counts of the test";
  std::ifstream in(dir + "/golden.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  const float atol = doc["tolerance"]["logits_atol"].get<float>(), rtol = doc["tolerance"]["logits_rtol"].get<float>();
  TwoStageRunner runner(spec, open_weight_source(dir), tp);
  for (const auto& p : doc["prompts"]) {
    testing::Driver d(runner);
    auto prompt = p["prompt_ids"].get<std::vector<int32_t>>();
    auto want = p["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<float> logits = d.prefill(1, prompt, 16);
    EXPECT_EQ(testing::compare_all(logits, p["last_logits"].get<std::vector<float>>(), atol, rtol), "")
        << "prompt of " << prompt.size() << " tokens, rank " << tp.rank() << " of " << tp.size();
    std::vector<int32_t> got{testing::greedy(logits)};
    while (got.size() < want.size()) {
      StepPlan plan;
      d.add(plan, 1, {got.back()}, true);
      got.push_back(testing::greedy(d.run(plan).at(0)));
    }
    EXPECT_EQ(got, want) << "prompt of " << prompt.size() << " tokens";
  }
}

// Heads divisible by 2 and 4; llama3_rope and mistral_swa have 2 KV heads (replicated at tp 4),
// llama_dynamic has one (always replicated). Prompts longer than max_position_embeddings are
// prefilled in 16-token chunks, so dynamic NTK is avoided here: its prompts stay as they are.
INSTANTIATE_TEST_SUITE_P(Goldens, TensorParallelGolden, ::testing::Values("llama3_rope", "mistral_swa"));

}  // namespace
}  // namespace conveyor
