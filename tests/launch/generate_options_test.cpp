// `conveyor generate`'s flag parsing without running anything: sampling flags land on their keys
// with their flag as origin, --set beats a flag, generation_config.json fills only keys still at
// their default, and --input's job options fall back to the io.* keys.
#include "launch/generate_options.h"

#include <gtest/gtest.h>

#include "runtime/config/cli.h"
#include "runtime/core/error.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

struct Parsed {
  boost::program_options::variables_map vm;
  Config cfg;
};

Parsed parse(const std::vector<std::string>& args) {
  Parsed p;
  p.vm = parse_command_line(args, generate_options());
  p.cfg = config_from_options(p.vm);
  return p;
}

TEST(GenerateOptions, SamplingFlagsLandOnTheirKeysAndSetWins) {
  Parsed p = parse({"--temperature", "0.7", "--top-k", "40", "--max-tokens", "9", "--ignore-eos",
                    "--set", "sampling.top_k=5", "--min-p", "0.05"});
  apply_sampling_flags(p.vm, p.cfg);
  EXPECT_DOUBLE_EQ(p.cfg.get_float("sampling.temperature"), 0.7);
  EXPECT_EQ(p.cfg.value("sampling.temperature").origin, "--temperature");
  EXPECT_EQ(p.cfg.get_int("sampling.top_k"), 5);  // --set beats --top-k
  EXPECT_EQ(p.cfg.value("sampling.top_k").origin, "--set sampling.top_k=5");
  EXPECT_EQ(p.cfg.get_int("sampling.max_tokens"), 9);
  EXPECT_DOUBLE_EQ(p.cfg.get_float("sampling.min_p"), 0.05);
  EXPECT_TRUE(p.cfg.get_bool("sampling.ignore_eos"));
  EXPECT_EQ(p.cfg.value("sampling.ignore_eos").origin, "--ignore-eos");
  EXPECT_EQ(p.cfg.value("sampling.top_p").origin, "default");
  Parsed q = parse({"--ignore-eos", "--set", "sampling.ignore_eos=false"});
  apply_sampling_flags(q.vm, q.cfg);
  EXPECT_FALSE(q.cfg.get_bool("sampling.ignore_eos"));  // --set beats --ignore-eos too
}

TEST(GenerateOptions, GenerationConfigFillsOnlyDefaults) {
  Parsed p = parse({"--top-p", "0.5"});
  ModelSpec spec;
  spec.source = "m/config.json";
  spec.generation.temperature = 0.6;
  spec.generation.top_p = 0.9;
  spec.generation.top_k = 20;
  apply_generation_defaults(spec, p.cfg);
  apply_sampling_flags(p.vm, p.cfg);
  EXPECT_DOUBLE_EQ(p.cfg.get_float("sampling.temperature"), 0.6);
  EXPECT_EQ(p.cfg.value("sampling.temperature").origin, "m/config.json (generation_config)");
  EXPECT_EQ(p.cfg.get_int("sampling.top_k"), 20);
  EXPECT_DOUBLE_EQ(p.cfg.get_float("sampling.top_p"), 0.5);  // the flag, over generation_config
  ModelSpec greedy;
  greedy.generation.do_sample = false;
  greedy.generation.temperature = 0.6;
  Parsed q = parse({});
  apply_generation_defaults(greedy, q.cfg);
  EXPECT_EQ(q.cfg.get_float("sampling.temperature"), 0.0);  // do_sample false: greedy
}

TEST(GenerateOptions, PromptSamplingParamsTakeStopsAndLogprobsAndValidate) {
  Parsed p = parse({"--stop", "###", "--stop", "\n\n", "--logprobs", "3", "--max-tokens", "4"});
  apply_sampling_flags(p.vm, p.cfg);
  const SamplingParams params = prompt_sampling_params(p.cfg, p.vm);
  EXPECT_EQ(params.stop, (std::vector<std::string>{"###", "\n\n"}));
  EXPECT_EQ(params.logprobs, 3);
  EXPECT_EQ(params.max_tokens, 4);
  Parsed bad = parse({"--logprobs=-2"});
  EXPECT_THROW(prompt_sampling_params(bad.cfg, bad.vm), Error);
}

TEST(GenerateOptions, BatchJobOptionsFallBackToTheIoKeys) {
  Parsed flags = parse({"--input", "in.jsonl", "--output", "out.jsonl", "--errors", "e.jsonl", "--strict",
                        "--chat-template", "llama3"});
  BatchJobOptions a = batch_job_options(flags.cfg, flags.vm, "");
  EXPECT_EQ(a.input, "in.jsonl");
  EXPECT_EQ(a.output, "out.jsonl");
  EXPECT_EQ(a.errors, "e.jsonl");
  EXPECT_TRUE(a.strict);
  EXPECT_EQ(a.chat_template_name, "llama3");
  EXPECT_EQ(a.model_chat_template, "");
  Parsed keys = parse({"--input", "in.jsonl", "--set", "io.output=o2.jsonl", "--set", "io.strict=true",
                       "--set", "model.config=configs/models/x.yaml"});
  BatchJobOptions b = batch_job_options(keys.cfg, keys.vm, "");
  EXPECT_EQ(b.output, "o2.jsonl");
  EXPECT_EQ(b.errors, "");
  EXPECT_TRUE(b.strict);
  EXPECT_EQ(b.model, "configs/models/x.yaml");  // dummy weights: the shape's file names the model
  EXPECT_EQ(b.chat_template_name, "");
  BatchJobOptions c = batch_job_options(keys.cfg, keys.vm, testing::test_model_path());
  EXPECT_EQ(c.model, testing::test_model_path());
  EXPECT_NE(c.model_chat_template.find("<|im_start|>"), std::string::npos);
}

TEST(GenerateOptions, UnknownFlagIsRefusedWithASuggestion) {
  try {
    parse({"--temprature", "0.5"});
    ADD_FAILURE() << "an unknown flag parsed";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("temperature"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace conveyor
