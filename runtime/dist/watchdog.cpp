// Watchdog (see watchdog.h). The polling thread holds the lock only to read state; on_fire runs
// without it, so a handler may itself use the watchdog (or block in MPI_Abort) without deadlock.
#include "runtime/dist/watchdog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/heartbeat.h"
#include "runtime/dist/mpi_runtime.h"

namespace conveyor {

namespace {

std::string seconds(double s) {
  std::ostringstream os;
  os.precision(s < 10 ? 2 : 0);
  os << std::fixed << s << " s";
  return os.str();
}

}  // namespace

Watchdog::Watchdog(Options options, OnFire on_fire) : options_(options), on_fire_(std::move(on_fire)) {
  CONVEYOR_CHECK(options_.poll_interval_s > 0, "watchdog poll interval must be > 0 s, got ",
                 options_.poll_interval_s);
  if (!on_fire_) {
    on_fire_ = [this](const std::string& why) {
      if (!why.empty()) spdlog::error("{}", why);
      std::vector<Communicator*> comms;
      {
        std::lock_guard<std::mutex> lock(mu_);
        comms = comms_;
      }
      for (Communicator* c : comms) c->abort();
      abort_job(1);
    };
  }
  if (options_.heartbeat_world != MPI_COMM_NULL) {
    heartbeat_ = std::make_unique<Heartbeat>(options_.heartbeat_world, options_.stage, options_.tensor_rank);
    // Several beats within a deadline, so a silent peer stands out well before anyone fires.
    if (options_.deadline_s > 0) beat_interval_s_ = std::min(1.0, options_.deadline_s / 4);
    beat_interval_s_ = std::max(beat_interval_s_, options_.poll_interval_s);
  }
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::watch(Communicator* c) {
  CONVEYOR_CHECK(c != nullptr, "Watchdog::watch: null communicator");
  std::lock_guard<std::mutex> lock(mu_);
  comms_.push_back(c);
}

void Watchdog::unwatch(Communicator* c) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = comms_.begin(); it != comms_.end();) it = *it == c ? comms_.erase(it) : it + 1;
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

uint64_t Watchdog::arm(std::string op, std::string context) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  armed_.emplace(id, Armed{std::move(op), std::move(context), Clock::now()});
  return id;
}

void Watchdog::disarm(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = armed_.find(id);
  if (it == armed_.end()) return;
  last_op_ = it->second.op + (it->second.context.empty() ? "" : " of " + it->second.context);
  armed_.erase(it);
  ++progress_;
  last_progress_ = Clock::now();
}

std::string Watchdog::prefix() const {
  const ProcessIdentity& me = process_identity();
  std::ostringstream os;
  os << "rank " << me.rank << " (host " << (me.host.empty() ? "?" : me.host);
  if (options_.stage >= 0) os << ", stage " << options_.stage;
  if (options_.tensor_rank >= 0) os << ", tensor rank " << options_.tensor_rank;
  os << ")";
  return os.str();
}

Watchdog::Finding Watchdog::check_locked(Clock::time_point now) const {
  // What this rank is waiting for, if anything: a communicator error is easier to act on with it.
  std::string waiting;
  if (!armed_.empty()) {
    const Armed& a = armed_.begin()->second;
    waiting = " while in " + a.op + (a.context.empty() ? "" : " of " + a.context);
  }
  for (const Communicator* c : comms_) {
    const std::string err = c->async_error();
    if (!err.empty()) return {err + waiting, false};
  }
  if (options_.deadline_s <= 0) return {};
  for (const auto& [id, a] : armed_) {
    const double waited = std::chrono::duration<double>(now - a.start).count();
    if (waited > options_.deadline_s)
      return {"no progress for " + seconds(waited) + " in " + a.op + (a.context.empty() ? "" : " of " + a.context),
              true};
  }
  return {};
}

std::string Watchdog::diagnose(const Finding& f, Clock::time_point now, double self_stopped_s) {
  const std::string tail = f.overrun ? "; aborting the job (runtime.watchdog_timeout is " +
                                           seconds(options_.deadline_s) + ")"
                                     : "; aborting the job";
  if (!heartbeat_) return prefix() + ": " + f.what + tail;
  if (heartbeat_->receive(now)) return "";  // a peer fired first and printed the diagnosis
  if (f.overrun && self_stopped_s > 0) {
    // Woken after being stopped: the wait overran because this rank did not run, not its peer.
    return prefix() + ": this rank itself was stopped for " + seconds(self_stopped_s) +
           " (SIGSTOP, or no CPU), so " + f.what + tail;
  }
  const std::string culprit = heartbeat_->blame(now, std::max(options_.deadline_s / 2, 2 * beat_interval_s_));
  heartbeat_->announce_fired();
  return prefix() + ": " + f.what + (culprit.empty() ? "" : "; " + culprit) + tail;
}

void Watchdog::exchange_beats(Clock::time_point now, Clock::time_point* next_beat) {
  if (!heartbeat_) return;
  heartbeat_->receive(now);
  if (now < *next_beat) return;
  BeatState mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine.progress = progress_;
    mine.waiting = !armed_.empty();
    mine.idle_s = std::chrono::duration<double>(now - last_progress_).count();
    const Armed* a = armed_.empty() ? nullptr : &armed_.begin()->second;
    mine.op = a ? a->op + (a->context.empty() ? "" : " of " + a->context) : last_op_;
  }
  heartbeat_->send(mine);
  *next_beat = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(beat_interval_s_));
}

void Watchdog::run() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.poll_interval_s));
  // A gap this long between two polls means this process did not run (stopped, or starved of CPU).
  const double stopped_gap_s = std::max(2.0, options_.deadline_s / 2);
  Clock::time_point last_poll = Clock::now(), next_beat = last_poll;
  double self_stopped_s = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !fired_) {
    cv_.wait_for(lock, interval, [this] { return stop_; });
    if (stop_) break;
    const Clock::time_point now = Clock::now();
    const double gap = std::chrono::duration<double>(now - last_poll).count();
    if (gap > stopped_gap_s) self_stopped_s = std::max(self_stopped_s, gap);
    last_poll = now;
    const Finding f = check_locked(now);
    lock.unlock();
    if (f.what.empty()) {
      exchange_beats(now, &next_beat);
      lock.lock();
      continue;
    }
    lock.lock();
    fired_ = true;
    lock.unlock();
    fire(diagnose(f, now, self_stopped_s));
    return;
  }
}

void Watchdog::fire(const std::string& why) {
  try {
    on_fire_(why);
  } catch (const std::exception& e) {
    // Nothing can propagate out of the thread; the job must still end, so say why loudly.
    spdlog::error("{} (and the watchdog's handler threw: {})", why, e.what());
  }
}

Watchdog::Scope::Scope(Watchdog& wd, std::string op, std::string context)
    : wd_(wd), id_(wd.arm(std::move(op), std::move(context))) {}

Watchdog::Scope::~Scope() { wd_.disarm(id_); }

}  // namespace conveyor
