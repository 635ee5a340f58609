// Configuration: defaults < YAML < CLI, and every kind of bad input named by key path and file:line.
#include "runtime/config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

namespace po = boost::program_options;

// The message of the Error thrown by f, or "" when nothing was thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Config from_cli(std::vector<std::string> args) {
  po::options_description desc;
  add_config_options(&desc);
  return config_from_options(parse_command_line(args, desc));
}

std::string write_yaml(const std::string& name, const std::string& text) {
  std::string path = testing::temp_dir("config") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Config, Defaults) {
  Config c;
  EXPECT_EQ(c.get_int("parallel.pipeline"), 1);
  EXPECT_EQ(c.get_int("cache.block_size"), 16);
  EXPECT_DOUBLE_EQ(c.get_float("cache.gpu_memory_utilization"), 0.9);
  EXPECT_EQ(c.get_string("model.load_format"), "auto");
  EXPECT_TRUE(c.get_int_list("parallel.partition").empty());
  EXPECT_EQ(c.value("parallel.pipeline").origin, "default");
}

TEST(Config, LeadingTildeInStringsIsHome) {
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ASSERT_FALSE(home.empty());
  std::string path = write_yaml("home.yaml", "model:\n  path: ~/models/a.gguf\n  tokenizer: /t/~/x\n");
  Config c = from_cli({"--config", path, "--set", "io.output=~/out.jsonl", "--set", "io.errors=~x"});
  EXPECT_EQ(c.get_string("model.path"), home + "/models/a.gguf");
  EXPECT_EQ(c.get_string("model.tokenizer"), "/t/~/x");  // only a leading ~/ is the home
  EXPECT_EQ(c.get_string("io.output"), home + "/out.jsonl");
  EXPECT_EQ(c.get_string("io.errors"), "~x");  // ~user is not expanded
}

// The shipped run config (CONFIG of launch/slurm) parses and names the cached test model.
TEST(Config, ShippedRunConfigParses) {
  Config c;
  c.merge_yaml_file(std::string(CONVEYOR_SOURCE_DIR) + "/configs/smollm2-135m-instruct.yaml");
  EXPECT_EQ(c.get_string("model.path"),
            std::string(std::getenv("HOME")) + "/.cache/conveyor/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_DOUBLE_EQ(c.get_float("sampling.temperature"), 0.0);
}

TEST(Config, YamlThenCliPrecedence) {
  std::string path = write_yaml("run.yaml",
                                "model:\n  path: /models/llama\nparallel:\n  pipeline: 4\n  tensor: 2\n"
                                "  partition: [19, 21, 21, 19]\nscheduler:\n  max_num_seqs: 64\n");
  Config c = from_cli({"--config", path, "-tp", "4", "--set", "scheduler.max_num_seqs=32"});
  EXPECT_EQ(c.get_string("model.path"), "/models/llama");
  EXPECT_EQ(c.get_int("parallel.pipeline"), 4);  // YAML
  EXPECT_EQ(c.get_int("parallel.tensor"), 4);    // CLI flag beats YAML
  EXPECT_EQ(c.get_int("scheduler.max_num_seqs"), 32);  // --set beats YAML
  EXPECT_EQ(c.get_int_list("parallel.partition"), (std::vector<int64_t>{19, 21, 21, 19}));
  EXPECT_EQ(c.value("parallel.pipeline").origin, path + ":4");
  EXPECT_EQ(c.value("parallel.tensor").origin, "--tensor-parallel-size");
}

TEST(Config, VllmFlagNames) {
  Config c = from_cli({"--tensor-parallel-size", "2", "-pp", "3", "--max-num-seqs", "7", "--max-num-batched-tokens",
                       "512", "--gpu-memory-utilization", "0.5", "--max-model-len", "4096", "--dtype", "float16",
                       "--kv-cache-dtype", "fp8", "--load-format", "dummy", "--seed", "42"});
  EXPECT_EQ(c.get_int("parallel.tensor"), 2);
  EXPECT_EQ(c.get_int("parallel.pipeline"), 3);
  EXPECT_EQ(c.get_int("scheduler.max_num_seqs"), 7);
  EXPECT_EQ(c.get_int("scheduler.max_num_batched_tokens"), 512);
  EXPECT_DOUBLE_EQ(c.get_float("cache.gpu_memory_utilization"), 0.5);
  EXPECT_EQ(c.get_int("model.max_model_len"), 4096);
  EXPECT_EQ(c.get_string("model.dtype"), "float16");
  EXPECT_EQ(c.get_string("cache.kv_cache_dtype"), "fp8");
  EXPECT_EQ(c.get_string("model.load_format"), "dummy");
  EXPECT_EQ(c.get_int("runtime.seed"), 42);
  Config d = from_cli({"-tp=2", "-dp", "2"});
  EXPECT_EQ(d.get_int("parallel.tensor"), 2);
  EXPECT_EQ(d.get_int("parallel.data"), 2);
}

TEST(Config, UnknownYamlKeyNamesFileLineAndSuggests) {
  std::string path = write_yaml("typo.yaml", "parallel:\n  tensor: 2\n  pipelne: 4\n");
  std::string msg = error_of([&] { from_cli({"--config", path}); });
  EXPECT_NE(msg.find("unknown config key 'parallel.pipelne'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'parallel.pipeline'"), std::string::npos) << msg;
}

TEST(Config, UnknownSectionSuggests) {
  std::string msg = error_of([&] { Config().merge_yaml_text("paralel:\n  pipeline: 2\n", "x.yaml"); });
  EXPECT_NE(msg.find("unknown config section 'paralel' at x.yaml:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'parallel'"), std::string::npos) << msg;
}

TEST(Config, WrongTypeNamesKeyAndLine) {
  std::string msg = error_of([] { Config().merge_yaml_text("parallel:\n  pipeline: four\n", "a.yaml"); });
  EXPECT_NE(msg.find("'parallel.pipeline'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.yaml:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected an integer"), std::string::npos) << msg;
  msg = error_of([] { Config().merge_yaml_text("parallel:\n  tensor: [1, 2]\n", "b.yaml"); });
  EXPECT_NE(msg.find("got a list"), std::string::npos) << msg;
  msg = error_of([] { Config().merge_yaml_text("parallel:\n  partition: [1, x]\n", "c.yaml"); });
  EXPECT_NE(msg.find("list of integers"), std::string::npos) << msg;
  msg = error_of([] { Config().merge_yaml_text("scheduler:\n  enable_chunked_prefill: maybe\n", "d.yaml"); });
  EXPECT_NE(msg.find("boolean"), std::string::npos) << msg;
}

TEST(Config, OutOfRange) {
  for (const char* v : {"0", "1.5", "-0.1", "nan", "inf"}) {
    std::string msg = error_of([&] { from_cli({"--gpu-memory-utilization", v}); });
    EXPECT_NE(msg.find("cache.gpu_memory_utilization"), std::string::npos) << v << ": " << msg;
  }
  EXPECT_EQ(error_of([] { from_cli({"--gpu-memory-utilization", "1"}); }), "");
  std::string msg = error_of([] { from_cli({"-pp", "0"}); });
  EXPECT_NE(msg.find("parallel.pipeline"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"--block-size", "24"}); });
  EXPECT_NE(msg.find("must be one of"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"--dtype", "bfloat15"}); });
  EXPECT_NE(msg.find("did you mean 'bfloat16'"), std::string::npos) << msg;
  msg = error_of([] { Config().merge_yaml_text("sampling:\n  top_p: 0\n", "s.yaml"); });
  EXPECT_NE(msg.find("s.yaml:2"), std::string::npos) << msg;
}

// The help says "0 disables": 0 must pass the bounds (it was refused as out of (0, 1e7]).
TEST(Config, WatchdogTimeoutZeroIsAcceptedAndNegativeIsNot) {
  Config c = from_cli({"--watchdog-timeout", "0"});
  EXPECT_EQ(c.get_float("runtime.watchdog_timeout"), 0.0);
  EXPECT_EQ(c.value("runtime.watchdog_timeout").origin, "--watchdog-timeout");
  EXPECT_EQ(from_cli({"--watchdog-timeout", "0.5"}).get_float("runtime.watchdog_timeout"), 0.5);
  EXPECT_EQ(Config().get_float("runtime.watchdog_timeout"), 300.0);
  for (const char* v : {"-1", "-0.001", "1e8"}) {
    const std::string msg = error_of([&] { from_cli({"--watchdog-timeout", v}); });
    EXPECT_NE(msg.find("runtime.watchdog_timeout"), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find("[0, "), std::string::npos) << v << ": " << msg;
  }
}

TEST(Config, CrossKeyChecks) {
  std::string msg = error_of([] { from_cli({"-pp", "3", "--partition", "[4, 4]"}); });
  EXPECT_NE(msg.find("has 2 entries but parallel.pipeline is 3"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"-pp", "2", "--partition", "4,0"}); });
  EXPECT_NE(msg.find("stage 1 gets 0 layers"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"--set", "sampling.min_tokens=9", "--set", "sampling.max_tokens=4"}); });
  EXPECT_NE(msg.find("min_tokens"), std::string::npos) << msg;
}

TEST(Config, WorldSizeMismatchPrintsAllFourNumbers) {
  Config c = from_cli({"-dp", "2", "-pp", "3", "-tp", "2"});
  std::string msg = error_of([&] { c.check_world_size(8); });
  EXPECT_NE(msg.find("data (2) x pipeline (3) x tensor (2) = 12 ranks, but the job has 8 ranks"), std::string::npos)
      << msg;
  EXPECT_EQ(error_of([&] { c.check_world_size(12); }), "");
}

TEST(Config, CliErrors) {
  std::string msg = error_of([] { from_cli({"--max-num-seq", "3"}); });
  EXPECT_NE(msg.find("did you mean '--max-num-seqs'"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"--set", "parallel.pipeline"}); });
  EXPECT_NE(msg.find("key=value"), std::string::npos) << msg;
  msg = error_of([] { from_cli({"--config", "/nonexistent/x.yaml"}); });
  EXPECT_NE(msg.find("/nonexistent/x.yaml"), std::string::npos) << msg;
  msg = error_of([] { Config().merge_yaml_text("parallel: [1\n", "broken.yaml"); });
  EXPECT_NE(msg.find("broken.yaml:"), std::string::npos) << msg;
}

TEST(Config, PrintShowsEffectiveValuesAndOrigins) {
  Config c = from_cli({"-pp", "2"});
  std::string y = c.to_yaml();
  EXPECT_NE(y.find("parallel:\n"), std::string::npos);
  EXPECT_NE(y.find("  pipeline: 2  # --pipeline-parallel-size"), std::string::npos) << y;
  // The printed YAML is itself a valid config giving the same values.
  Config round;
  round.merge_yaml_text(y, "printed");
  EXPECT_EQ(round.get_int("parallel.pipeline"), 2);
  EXPECT_EQ(round.to_yaml().size() > 0, true);
}

}  // namespace
}  // namespace conveyor
