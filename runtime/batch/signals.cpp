// Stop-signal handling (see signals.h). The handler reads only atomics and buffers filled at install
// time, and calls only write() and _exit(), which are async-signal-safe.
#include "runtime/batch/signals.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {

namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_graceful{false};
std::atomic<bool> g_reported{false};  // the stop's own message is out: a later signal adds nothing
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be lock-free to be signal-safe");
static_assert(std::atomic<bool>::is_always_lock_free, "the mode must be lock-free to be signal-safe");

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1, SIGUSR2};
constexpr size_t kNumStopSignals = sizeof(kStopSignals) / sizeof(kStopSignals[0]);
constexpr size_t kMessageBytes = 320;

// What the handler writes, per stop signal; empty on ranks other than 0, so a job prints it once.
struct HandlerText {
  char startup[kMessageBytes];
  size_t startup_len;
  char second[kMessageBytes];
  size_t second_len;
};
HandlerText g_text[kNumStopSignals];

struct sigaction g_previous[kNumStopSignals + 1];  // the stop signals, then SIGXFSZ
bool g_installed = false;
std::mutex g_install_mutex;
std::vector<std::pair<int, int>> g_relay;

int index_of(int sig) {
  for (size_t i = 0; i < kNumStopSignals; ++i)
    if (kStopSignals[i] == sig) return static_cast<int>(i);
  return -1;
}

void write_all(const char* text, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, len);
    if (n <= 0) return;
    text += n;
    len -= static_cast<size_t>(n);
  }
}

void on_stop_signal(int sig) {
  const int i = index_of(sig);
  if (!g_graceful.load()) {
    if (i >= 0) write_all(g_text[i].startup, g_text[i].startup_len);
    _exit(kExitInterrupted);
  }
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) return;
  if (i >= 0 && !g_reported.load()) write_all(g_text[i].second, g_text[i].second_len);
  _exit(kExitInterrupted);
}

// The action install_stop_handlers installs for every stop signal.
struct sigaction stop_action() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigfillset(&sa.sa_mask);  // one handler at a time: a second signal waits for the first to return
  sa.sa_flags = SA_RESTART;
  return sa;
}

// Rank 0 of the launcher's world (before MPI is up, the launcher's environment is all there is), or
// a process started without a launcher.
bool launcher_rank_is_zero() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v && *v) return std::strtol(v, nullptr, 10) == 0;
  }
  return true;
}

void fill(char* dst, size_t* len, const std::string& line) {
  const std::string text = "conveyor: " + line + "\n";
  *len = std::min(text.size(), kMessageBytes);
  std::memcpy(dst, text.data(), *len);
}

void compose_handler_text() {
  const bool speaks = launcher_rank_is_zero();
  for (size_t i = 0; i < kNumStopSignals; ++i) {
    HandlerText& t = g_text[i];
    t.startup_len = t.second_len = 0;
    if (!speaks) continue;
    fill(t.startup, &t.startup_len, startup_stop_message(kStopSignals[i]));
    fill(t.second, &t.second_len, second_stop_message(kStopSignals[i]));
  }
}

int signal_by_name(std::string name) {
  if (starts_with(name, "SIG")) name = name.substr(3);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT})
    if (signal_name(sig) == "SIG" + name) return sig;
  return 0;
}

}  // namespace

std::vector<std::pair<int, int>> parse_signal_relay(const std::string& spec) {
  std::vector<std::pair<int, int>> out;
  for (const std::string& entry : split(spec, ',')) {
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    const int got = eq == std::string::npos ? 0 : signal_by_name(entry.substr(0, eq));
    const int meant = eq == std::string::npos ? 0 : signal_by_name(entry.substr(eq + 1));
    CONVEYOR_CHECK(got && meant, "CONVEYOR_SIGNAL_RELAY: '", entry,
                   "' is not RECEIVED=SENT with signal names (e.g. USR1=TERM,USR2=INT)");
    out.emplace_back(got, meant);
  }
  return out;
}

void install_stop_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed) return;
  const char* relay = std::getenv("CONVEYOR_SIGNAL_RELAY");
  g_relay = parse_signal_relay(relay ? relay : "");
  compose_handler_text();
  const struct sigaction sa = stop_action();
  for (size_t i = 0; i < kNumStopSignals; ++i) {
    CONVEYOR_CHECK(sigaction(kStopSignals[i], &sa, &g_previous[i]) == 0, "installing the handler for ",
                   signal_name(kStopSignals[i]), " failed: ", std::strerror(errno));
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  CONVEYOR_CHECK(sigaction(SIGXFSZ, &ignore, &g_previous[kNumStopSignals]) == 0, "ignoring SIGXFSZ failed: ",
                 std::strerror(errno));
  g_installed = true;
}

void restore_stop_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_installed) return;
  for (size_t i = 0; i < kNumStopSignals; ++i) sigaction(kStopSignals[i], &g_previous[i], nullptr);
  sigaction(SIGXFSZ, &g_previous[kNumStopSignals], nullptr);
  g_graceful.store(false);
  g_installed = false;
}

void begin_graceful_stop() {
  // Libraries initialised since install (CUDA, NCCL, the MPI runtime) may have replaced a handler or
  // blocked a stop signal in this thread; the job's loop polls here, so both are put back first.
  {
    std::lock_guard<std::mutex> lock(g_install_mutex);
    sigset_t stops;
    sigemptyset(&stops);
    for (int sig : kStopSignals) {
      sigaddset(&stops, sig);
      struct sigaction cur {};
      if (!g_installed || sigaction(sig, nullptr, &cur) != 0 || cur.sa_handler == on_stop_signal) continue;
      spdlog::warn("the {} handler was replaced after start-up (by a library); putting conveyor's back",
                   signal_name(sig));
      const struct sigaction sa = stop_action();
      sigaction(sig, &sa, nullptr);
    }
    pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  }
  g_graceful.store(true);
}
void mark_stop_reported() { g_reported.store(true); }

bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }
void clear_stop_request() {
  g_stop_signal.store(0);
  g_reported.store(false);
}

void request_stop(int signal) {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, signal);
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal " + std::to_string(signal);
  }
}

std::string stop_signal_name(int signal) {
  for (const auto& [got, meant] : g_relay)
    if (got == signal) return signal_name(meant) + " (relayed as " + signal_name(got) + ")";
  return signal_name(signal);
}

std::string interrupted_message(int signal, int64_t done, int64_t total, const std::string& output_path) {
  return detail::concat("stopped by ", stop_signal_name(signal), ": ", done, " of ", total, " requests are done in '",
                        output_path, "'; rerun the same command to resume the remaining ", total - done,
                        " (exit status ", kExitInterrupted, ")");
}

std::string startup_stop_message(int signal) {
  return detail::concat("stopped by ", stop_signal_name(signal),
                        " during start-up: nothing done yet; rerun the same command to resume (exit status ",
                        kExitInterrupted, ")");
}

std::string second_stop_message(int signal) {
  return detail::concat("stopped at once by a second ", stop_signal_name(signal),
                        ": every result written so far is kept; rerun the same command to resume (exit status ",
                        kExitInterrupted, ")");
}

}  // namespace conveyor
