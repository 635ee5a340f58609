// Watchdog for hangs and dead ranks: one thread per rank polls the registered communicators'
// async_error() and the deadline of every armed Scope (a blocking wait: pipeline recv, collective,
// stream sync). On the first error or overrun it fires once with a message naming rank, host,
// stage, the operation and its context; the default action logs it, aborts the communicators and
// ends the job (MPI_Abort), so no peer waits forever. Thread-safe; scopes may nest and overlap.
// With a heartbeat world (every rank of the job), the thread also exchanges heartbeats (heartbeat.h):
// the message names the rank that stopped, only the first rank to fire prints it, and a rank that
// was itself stopped (SIGSTOP, no CPU) says so instead of blaming the peer it waited for.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace conveyor {

class Communicator;
class Heartbeat;

class Watchdog {
 public:
  struct Options {
    double deadline_s = 300;      // runtime.watchdog_timeout; <= 0: scopes never expire
    double poll_interval_s = 0.2;
    int stage = -1;               // pipeline stage named in the message; -1: not named
    int tensor_rank = -1;         // tensor rank inside the stage, for the heartbeat
    // Collective over this communicator at construction: heartbeats with its ranks. MPI_COMM_NULL: none.
    MPI_Comm heartbeat_world = MPI_COMM_NULL;
  };
  // `why` is empty when another rank already reported the failure: end the job without a message.
  using OnFire = std::function<void(const std::string& why)>;

  // on_fire empty: log the message (unless empty), abort every watched communicator, then abort_job(1).
  explicit Watchdog(Options options, OnFire on_fire = {});
  ~Watchdog();  // stops and joins the thread within one poll interval
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(Communicator* c);    // not owned; unwatch it before destroying it
  void unwatch(Communicator* c);
  bool fired() const;

  // Arms the deadline while alive: Scope s(wd, "recv", "micro-batch 17 from rank 0 (stage 0)").
  class Scope {
   public:
    Scope(Watchdog& wd, std::string op, std::string context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& wd_;
    uint64_t id_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  struct Armed {
    std::string op;
    std::string context;
    Clock::time_point start;
  };

  struct Finding {
    std::string what;      // "" when healthy
    bool overrun = false;  // a deadline, not a communicator error
  };

  uint64_t arm(std::string op, std::string context);
  void disarm(uint64_t id);
  void run();
  Finding check_locked(Clock::time_point now) const;
  std::string prefix() const;
  // The message for `f`, with the rank to blame when the heartbeat knows one; "" to stay quiet.
  std::string diagnose(const Finding& f, Clock::time_point now, double self_stopped_s);
  void exchange_beats(Clock::time_point now, Clock::time_point* next_beat);
  void fire(const std::string& why);

  Options options_;
  OnFire on_fire_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool fired_ = false;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Armed> armed_;  // by arming order: the oldest overrun is reported
  int64_t progress_ = 0;             // scopes ended so far
  std::string last_op_;              // "op of context" of the latest scope
  Clock::time_point last_progress_ = Clock::now();
  std::unique_ptr<Heartbeat> heartbeat_;  // used by the thread only
  double beat_interval_s_ = 1;
  std::vector<Communicator*> comms_;
  std::thread thread_;
};

}  // namespace conveyor
