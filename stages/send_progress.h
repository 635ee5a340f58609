// How a CPU stage waits and sends. wait_politely: a long receive without spinning a core (MPI's blocking
// calls busy-poll, starving ranks that share the CPU). SendProgress: a helper thread tests the pending sends
// every 50 us until done (MPI without single-copy moves a message above its eager limit only inside a call
// of its sender). Needs MPI_THREAD_MULTIPLE (available()); requests are touched only under the lock.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/dist/communicator.h"

namespace conveyor {

// Pipeline messages on the CPU backend go in pieces of at most this (MpiCommunicator::set_message_limit):
// under the eager limit of Open MPI's shared-memory transport (4 KiB with its headers) and of MPICH's.
constexpr size_t kCpuMessageBytes = 4000;

// Tests `request` with sleeps between (2 us doubling to 100 us) until it is done, then waits it.
void wait_politely(CommRequest& request);

class SendProgress {
 public:
  SendProgress();
  ~SendProgress();
  SendProgress(const SendProgress&) = delete;
  SendProgress& operator=(const SendProgress&) = delete;

  // Whether MPI allows a second thread to call it (MPI_THREAD_MULTIPLE).
  static bool available();

  // Tests these requests until they are done; the owner keeps them alive until drain() returns.
  void watch(const std::vector<CommRequest*>& requests);
  // Waits for every watched request and forgets them (before the owner destroys them).
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<CommRequest*> pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace conveyor
