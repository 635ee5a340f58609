// The plan printed is the plan run: every rank of a pp = world-size pipeline builds its stage through
// make_pipeline_stage (dummy weights, parallel.device_profile = doctor's measured speeds), and the
// split it runs (PipelineParts::partition, and this rank's layer range) equals what `conveyor plan`
// computes from the same config: plan_layout over the options and the doctor JSON's ceilings.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/dist/process_groups.h"
#include "runtime/dist/world_config.h"
#include "runtime/model/spec.h"
#include "stages/layout_plan.h"
#include "stages/pipeline_stage.h"
#include "stages/stage_options.h"
#include "tests/support/mpi_world.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using testing::world_rank;
using testing::world_size;

TEST(LayoutPlanMpi, RunSplitsAsThePlanPrints) {
  const std::string model = testing::data_path("goldens/llama_deep");
  const std::string doctor = testing::data_path("doctor_measured.json");
  const ModelSpec spec = load_model_spec(model);
  const int pp = world_size();
  ASSERT_LE(pp, spec.layers) << "run with at most " << spec.layers << " ranks";
  int differs_from_roofline = 0;
  for (int seqs : {1, 16, 256}) {
    Config cfg;
    cfg.set("model.path", model, "test");
    cfg.set("model.load_format", "dummy", "test");
    cfg.set("cache.block_size", "8", "test");
    cfg.set("cache.num_blocks", "16", "test");
    cfg.set("parallel.pipeline", std::to_string(pp), "test");
    cfg.set("parallel.device_profile", doctor, "test");
    cfg.set("scheduler.max_num_seqs", std::to_string(seqs), "test");
    // `conveyor plan` with this config: its options, the doctor JSON's ceilings, the default context.
    const StageOptions opt = StageOptions::from_config(cfg);
    const LayoutPlan printed = plan_layout(opt, spec, ceilings_from_doctor(read_doctor_json(doctor), doctor), 2048);
    WorldConfig world(Layout{1, pp, 1}, world_rank());
    auto groups = make_process_groups(world, Backend::kCpu);
    PipelineParts parts = make_pipeline_stage(opt, spec, world, *groups);
    EXPECT_EQ(parts.partition, printed.layer_counts()) << "max_num_seqs " << seqs;
    EXPECT_EQ(parts.micro_batches, pp);
    if (plan_layout(opt, spec, DeviceCeilings{}).layer_counts() != printed.layer_counts()) ++differs_from_roofline;
    if (world.is_leader()) {
      parts.stage->shutdown();
    } else {
      parts.stage->serve();
    }
  }
  // Which splits move with the measured speeds depends on pp; print it so a run shows the test's reach.
  if (world_rank() == 0) std::printf("pp %d: %d of 3 batch sizes split differently from the roofline\n", pp,
                                     differs_from_roofline);
}

}  // namespace
}  // namespace conveyor
