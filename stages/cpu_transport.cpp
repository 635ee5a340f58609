// wait_politely (see cpu_transport.h).
#include "stages/cpu_transport.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace conveyor {

void wait_politely(CommRequest& request) {
  auto pause = std::chrono::microseconds(2);
  while (!request.done()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(100));
  }
  request.wait();
}

}  // namespace conveyor
