// Subcommands of the conveyor executable. Each takes its arguments (after the subcommand name) and
// returns an exit status; errors are thrown as conveyor::Error and handled once in main.cpp.
#pragma once

#include <string>
#include <vector>

namespace conveyor {

using Args = std::vector<std::string>;

int run_config_command(const Args& args);  // conveyor config --print
int run_plan_command(const Args& args);    // conveyor plan
int run_doctor_command(const Args& args, int* argc, char*** argv);  // needs MPI
int run_inspect_command(const Args& args);  // conveyor inspect <model dir | file.gguf>
int run_generate_command(const Args& args, int* argc, char*** argv);  // conveyor generate (MPI)
int run_bench_command(const Args& args, int* argc, char*** argv);     // conveyor bench throughput|latency (MPI)
int run_perplexity_command(const Args& args, int* argc, char*** argv);  // conveyor perplexity (MPI)

}  // namespace conveyor
