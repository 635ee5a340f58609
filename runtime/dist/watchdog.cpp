// Watchdog (see watchdog.h). The polling thread holds the lock only to read state; on_fire runs
// without it, so a handler may itself use the watchdog (or block in MPI_Abort) without deadlock.
#include "runtime/dist/watchdog.h"

#include <spdlog/spdlog.h>

#include <sstream>

#include "runtime/core/error.h"
#include "runtime/dist/communicator.h"
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
      spdlog::error("{}", why);
      std::vector<Communicator*> comms;
      {
        std::lock_guard<std::mutex> lock(mu_);
        comms = comms_;
      }
      for (Communicator* c : comms) c->abort();
      abort_job(1);
    };
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
  armed_.erase(id);
}

std::string Watchdog::prefix() const {
  const ProcessIdentity& me = process_identity();
  std::ostringstream os;
  os << "rank " << me.rank << " (host " << (me.host.empty() ? "?" : me.host);
  if (options_.stage >= 0) os << ", stage " << options_.stage;
  os << ")";
  return os.str();
}

std::string Watchdog::check_locked(Clock::time_point now) const {
  // What this rank is waiting for, if anything: a communicator error is easier to act on with it.
  std::string waiting;
  if (!armed_.empty()) {
    const Armed& a = armed_.begin()->second;
    waiting = " while in " + a.op + (a.context.empty() ? "" : " of " + a.context);
  }
  for (const Communicator* c : comms_) {
    const std::string err = c->async_error();
    if (!err.empty()) return prefix() + ": " + err + waiting + "; aborting the job";
  }
  if (options_.deadline_s <= 0) return "";
  for (const auto& [id, a] : armed_) {
    const double waited = std::chrono::duration<double>(now - a.start).count();
    if (waited > options_.deadline_s) {
      return prefix() + ": no progress for " + seconds(waited) + " in " + a.op +
             (a.context.empty() ? "" : " of " + a.context) + "; aborting the job (runtime.watchdog_timeout is " +
             seconds(options_.deadline_s) + ")";
    }
  }
  return "";
}

void Watchdog::run() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.poll_interval_s));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !fired_) {
    cv_.wait_for(lock, interval, [this] { return stop_; });
    if (stop_) break;
    const std::string why = check_locked(Clock::now());
    if (why.empty()) continue;
    fired_ = true;
    lock.unlock();
    fire(why);
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
