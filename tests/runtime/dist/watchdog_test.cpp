// Watchdog: an overrun scope fires once with rank/stage/op/context in the message; scopes that end in
// time (nested too) do not; a communicator's asynchronous error fires; a deadline of 0 disables
// scopes; destruction joins promptly even with a long poll interval. on_fire is injected: no abort.
#include "runtime/dist/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/config/config.h"
#include "runtime/core/error.h"
#include "runtime/dist/communicator.h"

namespace conveyor {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Records what the watchdog reported.
struct Fired {
  std::mutex mu;
  std::string why;
  std::atomic<int> count{0};
  Watchdog::OnFire handler() {
    return [this](const std::string& w) {
      std::lock_guard<std::mutex> lock(mu);
      why = w;
      ++count;
    };
  }
  bool wait(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (count == 0 && Clock::now() < end) std::this_thread::sleep_for(5ms);
    return count > 0;
  }
  std::string message() {
    std::lock_guard<std::mutex> lock(mu);
    return why;
  }
};

// A communicator whose only behaviour is a settable asynchronous error.
class FakeComm : public Communicator {
 public:
  void set_error(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = e;
  }
  std::string async_error() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  void abort() override { aborted_ = true; }
  bool aborted() const { return aborted_; }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* kind() const override { return "fake"; }
  std::string name() const override { return "fake group"; }
  void send(const void*, size_t, DType, int, Stream) override { unused(); }
  void recv(void*, size_t, DType, int, Stream) override { unused(); }
  std::unique_ptr<CommRequest> isend(const void*, size_t, DType, int, Stream) override { unused(); }
  std::unique_ptr<CommRequest> irecv(void*, size_t, DType, int, Stream) override { unused(); }
  void all_reduce(const void*, void*, size_t, DType, ReduceOp, Stream) override { unused(); }
  void all_gather(const void*, void*, size_t, DType, Stream) override { unused(); }
  void broadcast(void*, size_t, DType, int, Stream) override { unused(); }
  void barrier(Stream) override { unused(); }

 private:
  [[noreturn]] static void unused() { CONVEYOR_THROW("FakeComm carries no data"); }
  mutable std::mutex mu_;
  std::string error_;
  std::atomic<bool> aborted_{false};
};

Watchdog::Options fast(double deadline_s) {
  Watchdog::Options o;
  o.deadline_s = deadline_s;
  o.poll_interval_s = 0.02;
  o.stage = 1;
  return o;
}

TEST(Watchdog, OverrunScopeFiresOnceNamingTheOperation) {
  Fired fired;
  Watchdog wd(fast(0.3), fired.handler());
  const auto start = Clock::now();
  {
    Watchdog::Scope s(wd, "recv", "micro-batch 17 from rank 0 (stage 0)");
    ASSERT_TRUE(fired.wait(3000ms)) << "a 0.3 s deadline did not fire within 3 s";
    EXPECT_GE(Clock::now() - start, 300ms);
    std::this_thread::sleep_for(200ms);  // still overrun: it must not fire again
  }
  const std::string why = fired.message();
  EXPECT_NE(why.find("stage 1)"), std::string::npos) << why;
  EXPECT_NE(why.find("rank "), std::string::npos) << why;
  EXPECT_NE(why.find("host "), std::string::npos) << why;
  EXPECT_NE(why.find("no progress for"), std::string::npos) << why;
  EXPECT_NE(why.find("in recv of micro-batch 17 from rank 0 (stage 0)"), std::string::npos) << why;
  EXPECT_NE(why.find("aborting the job"), std::string::npos) << why;
  EXPECT_EQ(fired.count, 1);
  EXPECT_TRUE(wd.fired());
}

TEST(Watchdog, ScopesThatEndInTimeDoNotFire) {
  Fired fired;
  Watchdog wd(fast(0.3), fired.handler());
  for (int i = 0; i < 5; ++i) {
    Watchdog::Scope outer(wd, "step", "micro-batch " + std::to_string(i));
    Watchdog::Scope inner(wd, "all_reduce", "tp group of stage 1");
    std::this_thread::sleep_for(100ms);  // 0.5 s in all, each scope 0.1 s
  }
  std::this_thread::sleep_for(500ms);  // nothing armed: idle time is not a hang
  EXPECT_EQ(fired.count, 0) << fired.message();
  EXPECT_FALSE(wd.fired());
}

TEST(Watchdog, ZeroDeadlineDisablesScopes) {
  Fired fired;
  Watchdog wd(fast(0.0), fired.handler());
  Watchdog::Scope s(wd, "recv", "micro-batch 1 from rank 0 (stage 0)");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(fired.count, 0) << fired.message();
}

// --watchdog-timeout 0 (the schema accepts it) reaches the watchdog as deadline 0: an overrun never
// fires, but a communicator's error still does, since only the deadline is disabled.
TEST(Watchdog, ZeroTimeoutFromTheConfigDisablesOnlyTheDeadline) {
  Config cfg;
  cfg.set("runtime.watchdog_timeout", "0", "--watchdog-timeout");
  Watchdog::Options opt = fast(100.0);
  opt.deadline_s = cfg.get_float("runtime.watchdog_timeout");
  Fired fired;
  FakeComm failing;
  Watchdog wd(opt, fired.handler());
  wd.watch(&failing);
  {
    Watchdog::Scope s(wd, "recv", "micro-batch 4 from rank 1 (stage 1)");
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(fired.count, 0) << fired.message();
    failing.set_error("NCCL error: remote process exited");
    ASSERT_TRUE(fired.wait(2000ms)) << "a communicator error did not fire with the deadline disabled";
  }
  EXPECT_NE(fired.message().find("remote process exited"), std::string::npos) << fired.message();
  EXPECT_EQ(fired.count, 1);
  wd.unwatch(&failing);
}

TEST(Watchdog, CommunicatorErrorFires) {
  Fired fired;
  FakeComm healthy, failing;
  Watchdog wd(fast(100.0), fired.handler());
  wd.watch(&healthy);
  wd.watch(&failing);
  Watchdog::Scope s(wd, "recv", "micro-batch 3 from rank 2 (stage 0)");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(fired.count, 0) << fired.message();
  failing.set_error("NCCL error on pipeline edge 0->1: remote process exited or there was a network error");
  ASSERT_TRUE(fired.wait(2000ms)) << "an injected communicator error did not fire within 2 s";
  const std::string why = fired.message();
  EXPECT_NE(why.find("remote process exited"), std::string::npos) << why;
  EXPECT_NE(why.find("while in recv of micro-batch 3 from rank 2 (stage 0)"), std::string::npos) << why;
  EXPECT_FALSE(failing.aborted());  // aborting is the default handler's job, not the injected one's
  wd.unwatch(&failing);
  wd.unwatch(&healthy);
}

TEST(Watchdog, DestructionJoinsPromptly) {
  Fired fired;
  Watchdog::Options o;
  o.deadline_s = 300;
  o.poll_interval_s = 30;  // the thread sleeps long; the destructor must wake it
  const auto start = Clock::now();
  {
    Watchdog wd(o, fired.handler());
    Watchdog::Scope s(wd, "recv", "micro-batch 0 from rank 0 (stage 0)");
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_LT(Clock::now() - start, 1000ms);
  EXPECT_EQ(fired.count, 0);
}

TEST(Watchdog, ScopesFromManyThreads) {
  Fired fired;
  Watchdog wd(fast(5.0), fired.handler());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&wd, t] {
      for (int i = 0; i < 200; ++i) Watchdog::Scope s(wd, "send", "micro-batch " + std::to_string(t * 1000 + i));
    });
  }
  for (auto& th : threads) th.join();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fired.count, 0) << fired.message();
}

TEST(Watchdog, RejectsABadPollInterval) {
  Watchdog::Options o;
  o.poll_interval_s = 0;
  EXPECT_THROW(Watchdog(o, [](const std::string&) {}), Error);
}

}  // namespace
}  // namespace conveyor
