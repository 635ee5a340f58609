// Stop signals (SIGTERM: scancel, preemption; SIGUSR1/SIGUSR2: sbatch --signal, or relayed through
// mpirun; SIGINT: Ctrl-C), honoured from the first statement of main(). Two modes:
// - at once (from install until work that can stop cleanly begins: MPI start-up, model load): the
//   handler writes "nothing done yet, rerun to resume" (rank 0) and _exit(kExitInterrupted);
// - graceful (a batch job's loop, a serving pipeline rank): the handler stores the signal in a
//   lock-free atomic that the job polls; it stops admitting, flushes and exits kExitInterrupted.
//   A second signal writes a message and _exit(kExitInterrupted) at once (the output stays
//   consistent: at most a torn last line, dropped on resume).
// Only write(), _exit() and atomics run in the handler; every message is composed at install time.
// SIGXFSZ is ignored, so a file-size limit (ulimit -f) is an EFBIG error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace conveyor {

// EX_TEMPFAIL from sysexits.h: "temporary failure, retry later", which is what an interrupted job
// that resumes on rerun is. Distinct from 1 (errors) and from 128+N (killed by a signal).
constexpr int kExitInterrupted = 75;

// Installs the handler for SIGTERM, SIGINT, SIGUSR1 and SIGUSR2 in the at-once mode, and ignores
// SIGXFSZ. Reads the environment (rank, CONVEYOR_SIGNAL_RELAY) once. Idempotent.
void install_stop_handlers();
// Puts back the actions that were in place before install_stop_handlers().
void restore_stop_handlers();
// Switches to the graceful mode: from now on the caller polls stop_requested().
void begin_graceful_stop();
// The stop has been reported (output closed, message printed): a signal from now on still exits with
// kExitInterrupted at once, but prints nothing (the job's one message is already out).
void mark_stop_reported();

bool stop_requested();
int stop_signal();  // the first signal received, 0 when none
// Forgets a received signal (tests, or a job runner that handles several jobs in one process).
void clear_stop_request();
// Marks a stop as if `signal` had arrived; for code paths (e.g. an MPI peer's stop message) that
// learn of the stop from elsewhere.
void request_stop(int signal);

// "SIGTERM" / "SIGUSR1" / "SIGINT" / "SIGUSR2" / "signal 12".
std::string signal_name(int signal);
// A launcher that cannot forward a signal relays it as another: Open MPI's mpirun turns SIGTERM and
// SIGINT into a kill of the job but forwards SIGUSR1/SIGUSR2, so scripts/mpirun_relay.sh sends those
// instead and sets CONVEYOR_SIGNAL_RELAY="USR1=TERM,USR2=INT". The name of what the user sent:
// "SIGINT (relayed as SIGUSR2)", or signal_name(signal) when it was not relayed.
std::string stop_signal_name(int signal);
// Parses a CONVEYOR_SIGNAL_RELAY value into (received, original) pairs; throws on a bad entry.
std::vector<std::pair<int, int>> parse_signal_relay(const std::string& spec);

// The line printed on rank 0 after a stop: what arrived, how many are done, and that rerunning resumes.
std::string interrupted_message(int signal, int64_t done, int64_t total, const std::string& output_path);
// The line printed by the at-once handler: a stop before any request could be done.
std::string startup_stop_message(int signal);
// The line printed when a second signal ends a graceful stop at once.
std::string second_stop_message(int signal);

}  // namespace conveyor
