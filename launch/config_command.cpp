// `conveyor config --print`: the effective configuration (defaults < YAML < CLI) with each value's
// origin, after validation. `--world-size N` also checks the layout against a job of N ranks.
#include <cstdio>
#include <iostream>

#include "launch/command.h"
#include "runtime/config/cli.h"
#include "runtime/core/error.h"

namespace po = boost::program_options;

namespace conveyor {

int run_config_command(const Args& args) {
  po::options_description desc("conveyor config options");
  desc.add_options()("help,h", "show this help")("print", "print the effective config as YAML")(
      "world-size", po::value<int>(), "check data x pipeline x tensor against this many ranks");
  add_config_options(&desc);
  po::variables_map vm = parse_command_line(args, desc);
  if (vm.count("help")) {
    std::cout << "usage: conveyor config --print [--config FILE] [--set key=value ...] [flags]\n\n" << desc;
    return 0;
  }
  Config cfg = config_from_options(vm);
  if (vm.count("world-size")) cfg.check_world_size(vm["world-size"].as<int>());
  if (vm.count("print") || !vm.count("world-size")) std::cout << cfg.to_yaml();
  return 0;
}

}  // namespace conveyor
