// Command-line side of the configuration: `--config file.yaml`, `--set key=value` for any schema key,
// and the flag names users know from vLLM (-tp, -pp, --max-num-seqs, ...), all mapped onto schema keys
// so that one parser validates every value. Precedence: defaults < YAML < flags < --set.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace conveyor {

struct ConfigFlag {
  std::string flag;  // long name without dashes: "tensor-parallel-size"
  std::string key;   // schema key: "parallel.tensor"
};
const std::vector<ConfigFlag>& config_flags();

// Adds --config, --set and every ConfigFlag to `desc`.
void add_config_options(boost::program_options::options_description* desc);

// Builds the effective config from parsed options (defaults, then --config, then flags, then --set).
Config config_from_options(const boost::program_options::variables_map& vm);

// Rewrites the vLLM-style short flags (-tp 2, -pp 4, -dp 2) into their long forms, which Boost cannot
// express as single-dash multi-letter options.
std::vector<std::string> normalize_args(const std::vector<std::string>& args);

// Parses `args` against `desc` (positional options optional); unknown options get a suggestion.
boost::program_options::variables_map parse_command_line(
    const std::vector<std::string>& args, const boost::program_options::options_description& desc,
    const boost::program_options::positional_options_description* positional = nullptr);

}  // namespace conveyor
