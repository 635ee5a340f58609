// Completes a stage's non-blocking sends while it computes: a helper thread tests the pending requests
// every 50 us (each test drives MPI's progress) until they are done, then sleeps until more come. The
// CPU backend's MPI without a single-copy mechanism (containers, CI) moves a message above its eager
// limit only inside an MPI call of the sender, so without this the next pipeline stage waits for the
// sender's whole next micro-batch. Needs MPI_THREAD_MULTIPLE (MpiRuntime asks for it; available()
// says whether MPI gave it); the requests are touched only under the lock.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/dist/communicator.h"

namespace conveyor {

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
