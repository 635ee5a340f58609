// Stop-signal handling (see signals.h). Only async-signal-safe operations happen in the handler:
// a lock-free atomic store, and for a repeated SIGINT, sigaction() and raise().
#include "runtime/batch/signals.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be lock-free to be signal-safe");

constexpr int kStopSignals[] = {SIGTERM, SIGUSR1, SIGINT};
struct sigaction g_previous[3];
bool g_installed = false;
std::mutex g_install_mutex;

void on_stop_signal(int sig) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) return;
  if (sig == SIGINT) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGINT, &dfl, nullptr);
    raise(SIGINT);
  }
}

}  // namespace

void install_stop_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (size_t i = 0; i < 3; ++i) {
    CONVEYOR_CHECK(sigaction(kStopSignals[i], &sa, &g_previous[i]) == 0, "installing the handler for ",
                   signal_name(kStopSignals[i]), " failed: ", std::strerror(errno));
  }
  g_installed = true;
}

void restore_stop_handlers() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (!g_installed) return;
  for (size_t i = 0; i < 3; ++i) sigaction(kStopSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }
void clear_stop_request() { g_stop_signal.store(0); }

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
    case SIGINT:
      return "SIGINT";
    default:
      return "signal " + std::to_string(signal);
  }
}

std::string interrupted_message(int signal, int64_t done, int64_t total, const std::string& output_path) {
  return detail::concat("stopped by ", signal_name(signal), ": ", done, " of ", total, " requests are done in '",
                        output_path, "'; rerun the same command to resume the remaining ", total - done,
                        " (exit status ", kExitInterrupted, ")");
}

}  // namespace conveyor
