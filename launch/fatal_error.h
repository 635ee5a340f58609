// How an error that ends the run reaches the user: one line naming the cause, the rank and the host,
// once per job. Rank 0 reports at once; another rank waits kPeerReportDelaySeconds first, so when every
// rank fails alike rank 0's abort ends them before they repeat it, while a failure of that rank alone
// is still reported. `--debug` adds the failed check's expression and its file:line.
#pragma once

#include <exception>
#include <string>

namespace conveyor {

constexpr double kPeerReportDelaySeconds = 2.0;

// Removes every `--debug` from argv (any position) and says whether there was one.
bool take_debug_flag(int* argc, char** argv);

// The report line for an exception (no trailing newline) and the exit status that goes with it: 1 for
// conveyor::Error and std::filesystem errors (a path named, with its problem), 70 for anything else.
struct FatalReport {
  std::string line;
  int status = 1;
};
FatalReport describe_fatal(const std::exception_ptr& error, bool debug);

// Prints describe_fatal's line (paced as above) and ends the job with its status (MPI_Abort when
// several ranks run). Never returns.
[[noreturn]] void report_fatal_and_exit(const std::exception_ptr& error, bool debug);

}  // namespace conveyor
