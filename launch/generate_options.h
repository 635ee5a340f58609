// The flags of `conveyor generate` and how they land on the config: sampling flags use vLLM's names
// and set the sampling.* keys (defaults < generation_config.json < YAML < flags < --set, so the same
// precedence holds for one prompt and for batch runs); --input/--output/... make the batch job's options.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "launch/batch_job.h"
#include "runtime/config/config.h"
#include "runtime/model/spec.h"
#include "runtime/sampling/params.h"

namespace conveyor {

// Every generate flag, the config flags (add_config_options) included.
boost::program_options::options_description generate_options();

// The model's generation_config.json values (spec.generation) on the sampling keys still at their
// schema default; do_sample false means greedy (temperature 0).
void apply_generation_defaults(const ModelSpec& spec, Config& cfg);

// The sampling flags given in vm onto their keys (origin "--flag"), except keys set by --set.
void apply_sampling_flags(const boost::program_options::variables_map& vm, Config& cfg);

// The one prompt's sampling parameters: the config's, plus --stop and --logprobs; validated.
SamplingParams prompt_sampling_params(const Config& cfg, const boost::program_options::variables_map& vm);

// The batch job of --input: paths from the flags or else the io.* keys, --strict or io.strict, the
// model recorded as model_path (or model.config for dummy weights) and its chat template text.
BatchJobOptions batch_job_options(const Config& cfg, const boost::program_options::variables_map& vm,
                                  const std::string& model_path);

// --served-model-name's values, else the model path as given and its last component (vLLM serves the
// --model string; the file name is what a user of a long cache path writes).
std::vector<std::string> served_model_names(const boost::program_options::variables_map& vm, const std::string& model);

}  // namespace conveyor
