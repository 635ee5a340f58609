// SendProgress (see send_progress.h).
#include "stages/send_progress.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>

namespace conveyor {

namespace {
constexpr auto kPollInterval = std::chrono::microseconds(50);
}  // namespace

void wait_politely(CommRequest& request) {
  auto pause = std::chrono::microseconds(2);
  while (!request.done()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
  request.wait();
}

SendProgress::SendProgress() : thread_([this] { loop(); }) {}

SendProgress::~SendProgress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

bool SendProgress::available() {
  int level = MPI_THREAD_SINGLE;
  return MPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}

void SendProgress::watch(const std::vector<CommRequest*>& requests) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.insert(pending_.end(), requests.begin(), requests.end());
  }
  cv_.notify_one();
}

void SendProgress::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  for (CommRequest* r : pending_) r->wait();
  pending_.clear();
}

void SendProgress::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // A done request stays in the list until drain(): done() on it again is a no-op. A failing test
    // leaves the request to drain(), whose wait() reports the error on the stage's thread.
    bool busy = false;
    try {
      busy = std::any_of(pending_.begin(), pending_.end(), [](CommRequest* r) { return !r->done(); });
    } catch (...) {
      busy = false;
    }
    if (!busy) {
      cv_.wait(lock);
      continue;
    }
    lock.unlock();
    std::this_thread::sleep_for(kPollInterval);
    lock.lock();
  }
}

}  // namespace conveyor
