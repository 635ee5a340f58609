// Graceful stop of a batch job on SIGTERM (scancel, preemption), SIGUSR1 (sbatch --signal=B:USR1@120)
// and SIGINT (Ctrl-C). The handler only stores the signal number in a lock-free atomic, which is
// async-signal-safe; the engine polls stop_requested() between steps, stops admitting requests,
// finishes or drops what is in flight, flushes the output and exits with kExitInterrupted.
// A second SIGINT while a stop is pending restores the default action and re-raises: Ctrl-C twice kills.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor {

// EX_TEMPFAIL from sysexits.h: "temporary failure, retry later", which is what an interrupted job
// that resumes on rerun is. Distinct from 1 (errors) and from 128+N (killed by a signal).
constexpr int kExitInterrupted = 75;

// Installs the handler for SIGTERM, SIGUSR1 and SIGINT (SA_RESTART, so I/O is not cut short). Idempotent.
void install_stop_handlers();
// Puts back the actions that were in place before install_stop_handlers().
void restore_stop_handlers();

bool stop_requested();
int stop_signal();  // the first signal received, 0 when none
// Forgets a received signal (tests, or a job runner that handles several jobs in one process).
void clear_stop_request();
// Marks a stop as if `signal` had arrived; for code paths (e.g. an MPI peer's stop message) that
// learn of the stop from elsewhere.
void request_stop(int signal);

// "SIGTERM" / "SIGUSR1" / "SIGINT" / "signal 12".
std::string signal_name(int signal);
// The line printed on rank 0 after a stop: what arrived, how many are done, and that rerunning resumes.
std::string interrupted_message(int signal, int64_t done, int64_t total, const std::string& output_path);

}  // namespace conveyor
