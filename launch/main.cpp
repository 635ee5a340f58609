// Entry point: dispatches to a subcommand and is the one place that catches conveyor::Error. A failure
// is reported once per job (launch/fatal_error.h), and in a multi-rank job MPI_Abort ends every rank so
// no peer waits forever on the one that failed.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "launch/command.h"
#include "launch/fatal_error.h"
#include "runtime/batch/signals.h"
#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/dist/mpi_runtime.h"

namespace {

const char* kUsage =
    "conveyor — pipeline- and tensor-parallel LLM inference\n\n"
    "usage: conveyor <command> [options]\n\n"
    "commands:\n"
    "  doctor     pre-flight check of ranks, GPUs and links (run under mpirun/srun)\n"
    "  config     print the effective configuration (--print)\n"
    "  plan       layer partition, memory and predicted bubble of a layout; --compare ranks layouts\n"
    "  generate   generate text for a prompt or a batch file (--input), any pp x tp layout\n"
    "  bench      synthetic throughput or latency run (like vllm bench), any pp x tp layout\n"
    "  perplexity llama.cpp-protocol perplexity and KL divergence of a model on a text, any pp x tp layout\n"
    "  inspect    show a model's spec, tensors and tokenizer (HF directory or .gguf)\n"
    "  --version  print the version\n\n"
    "--debug (with any command): an error also shows the failed check and its source line.\n"
    "Run `conveyor <command> --help` for the options of a command.\n";

int dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  conveyor::Args args(argv + 2, argv + argc);
  if (cmd == "--version") {
    std::printf("conveyor %s\n", CONVEYOR_VERSION);
    return 0;
  }
  if (cmd == "config") return conveyor::run_config_command(args);
  if (cmd == "plan") return conveyor::run_plan_command(args);
  if (cmd == "doctor") return conveyor::run_doctor_command(args, &argc, &argv);
  if (cmd == "inspect") return conveyor::run_inspect_command(args);
  if (cmd == "generate") return conveyor::run_generate_command(args, &argc, &argv);
  if (cmd == "bench") return conveyor::run_bench_command(args, &argc, &argv);
  if (cmd == "perplexity") return conveyor::run_perplexity_command(args, &argc, &argv);
  CONVEYOR_THROW("unknown command '", cmd, "'",
                 conveyor::did_you_mean(cmd, {"doctor", "config", "generate", "bench", "plan", "inspect", "perplexity"}),
                 "; run `conveyor --help`");
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI start-up and model load, which take minutes at scale: a stop during them must still
  // end the job with the resumable status, not the default action's 128+N.
  conveyor::install_stop_handlers();
  const bool debug = conveyor::take_debug_flag(&argc, argv);
  try {
    return dispatch(argc, argv);
  } catch (...) {
    conveyor::report_fatal_and_exit(std::current_exception(), debug);
  }
}
