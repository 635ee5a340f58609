// Stop signals raised in-process set the flag the engine polls; a second Ctrl-C kills (checked in a
// forked child so the test process survives).
#include "runtime/batch/signals.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace conveyor {
namespace {

class Signals : public ::testing::Test {
 protected:
  void SetUp() override {
    install_stop_handlers();
    clear_stop_request();
  }
  void TearDown() override {
    clear_stop_request();
    restore_stop_handlers();
  }
};

TEST_F(Signals, EachStopSignalSetsTheFlag) {
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) {
    clear_stop_request();
    EXPECT_FALSE(stop_requested());
    ASSERT_EQ(raise(sig), 0);
    EXPECT_TRUE(stop_requested()) << signal_name(sig);
    EXPECT_EQ(stop_signal(), sig);
  }
}

TEST_F(Signals, FirstSignalWins) {
  raise(SIGUSR1);
  raise(SIGTERM);
  EXPECT_EQ(stop_signal(), SIGUSR1);
  clear_stop_request();
  request_stop(SIGTERM);
  EXPECT_EQ(stop_signal(), SIGTERM);
}

TEST_F(Signals, SecondCtrlCKills) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    raise(SIGINT);
    if (!stop_requested()) _exit(3);
    raise(SIGINT);  // must not return
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST_F(Signals, RestoreBringsBackThePreviousAction) {
  restore_stop_handlers();
  struct sigaction current {};
  sigaction(SIGUSR1, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  install_stop_handlers();
  sigaction(SIGUSR1, nullptr, &current);
  EXPECT_NE(current.sa_handler, SIG_DFL);
}

TEST(SignalsMessage, SaysWhatArrivedHowManyAreDoneAndHowToResume) {
  EXPECT_EQ(interrupted_message(SIGUSR1, 40, 100, "out.jsonl"),
            "stopped by SIGUSR1: 40 of 100 requests are done in 'out.jsonl'; rerun the same command to resume "
            "the remaining 60 (exit status 75)");
  EXPECT_EQ(kExitInterrupted, 75);
  EXPECT_EQ(signal_name(SIGHUP), "signal " + std::to_string(SIGHUP));
}

}  // namespace
}  // namespace conveyor
