// Stop signals: in the graceful mode they set the flag the job polls; before it (start-up) and on a
// second signal they end the process with status 75 and a message (checked in forked children, so
// the test process survives). SIGXFSZ is ignored: a file-size limit is an EFBIG error.
#include "runtime/batch/signals.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

class Signals : public ::testing::Test {
 protected:
  void SetUp() override {
    install_stop_handlers();
    begin_graceful_stop();
    clear_stop_request();
  }
  void TearDown() override {
    clear_stop_request();
    restore_stop_handlers();
  }
};

struct ChildResult {
  int status = 0;
  std::string err;  // what the child wrote to stderr
};

// Runs `body` in a forked child with stderr captured; the child's own exit status is 99 if body returns.
ChildResult in_child(const std::function<void()>& body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    body();
    _exit(99);
  }
  close(fds[1]);
  ChildResult r;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  EXPECT_EQ(waitpid(pid, &r.status, 0), pid);
  return r;
}

TEST_F(Signals, EachStopSignalSetsTheFlag) {
  for (int sig : {SIGTERM, SIGUSR1, SIGUSR2, SIGINT}) {
    clear_stop_request();
    EXPECT_FALSE(stop_requested());
    ASSERT_EQ(raise(sig), 0);
    EXPECT_TRUE(stop_requested()) << signal_name(sig);
    EXPECT_EQ(stop_signal(), sig);
  }
}

TEST_F(Signals, FirstSignalWins) {
  request_stop(SIGUSR1);
  request_stop(SIGTERM);
  EXPECT_EQ(stop_signal(), SIGUSR1);
  clear_stop_request();
  request_stop(SIGTERM);
  EXPECT_EQ(stop_signal(), SIGTERM);
}

TEST_F(Signals, ASecondSignalExitsAtOnceWithTheResumeMessage) {
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) {
    const ChildResult r = in_child([&] {
      raise(SIGUSR2);
      if (!stop_requested()) _exit(3);
      raise(sig);  // must not return
      _exit(4);
    });
    ASSERT_TRUE(WIFEXITED(r.status)) << signal_name(sig) << " killed the child with signal " << WTERMSIG(r.status);
    EXPECT_EQ(WEXITSTATUS(r.status), kExitInterrupted) << signal_name(sig);
    EXPECT_EQ(r.err, "conveyor: " + second_stop_message(sig) + "\n");
  }
}

TEST_F(Signals, ASignalAfterTheStopWasReportedExitsSilently) {
  for (int sig : {SIGINT, SIGTERM}) {
    const ChildResult r = in_child([&] {
      raise(SIGUSR1);
      if (!stop_requested()) _exit(3);
      mark_stop_reported();  // the job has printed its one message
      raise(sig);            // must not return
      _exit(4);
    });
    ASSERT_TRUE(WIFEXITED(r.status)) << signal_name(sig) << " killed the child with signal " << WTERMSIG(r.status);
    EXPECT_EQ(WEXITSTATUS(r.status), kExitInterrupted) << signal_name(sig);
    EXPECT_EQ(r.err, "") << signal_name(sig);
  }
}

TEST_F(Signals, DuringStartUpEachSignalExitsWithTheSameStatusAndMessage) {
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) {
    const ChildResult r = in_child([&] {
      restore_stop_handlers();
      install_stop_handlers();  // the at-once mode of main()'s first statement
      raise(sig);
      _exit(4);
    });
    ASSERT_TRUE(WIFEXITED(r.status)) << signal_name(sig) << " killed the child with signal " << WTERMSIG(r.status);
    EXPECT_EQ(WEXITSTATUS(r.status), kExitInterrupted);
    EXPECT_EQ(r.err, "conveyor: stopped by " + signal_name(sig) +
                         " during start-up: nothing done yet; rerun the same command to resume (exit status 75)\n");
  }
}

TEST_F(Signals, OnlyRankZeroSpeaks) {
  const ChildResult r = in_child([] {
    restore_stop_handlers();
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    install_stop_handlers();
    raise(SIGTERM);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), kExitInterrupted);
  EXPECT_EQ(r.err, "");
}

TEST_F(Signals, ARelayedSignalIsNamedAsWhatWasSent) {
  const ChildResult r = in_child([] {
    restore_stop_handlers();
    setenv("CONVEYOR_SIGNAL_RELAY", "USR1=TERM,SIGUSR2=SIGINT", 1);
    install_stop_handlers();
    raise(SIGUSR2);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_NE(r.err.find("stopped by SIGINT (relayed as SIGUSR2) during start-up"), std::string::npos) << r.err;
  EXPECT_EQ(parse_signal_relay("USR1=TERM"), (std::vector<std::pair<int, int>>{{SIGUSR1, SIGTERM}}));
  EXPECT_THROW(parse_signal_relay("USR1"), Error);
  EXPECT_THROW(parse_signal_relay("USR1=BOGUS"), Error);
}

TEST_F(Signals, AFileSizeLimitIsAnErrorNotAKill) {
  const std::string path = testing::TempDir() + "signals_test_fsize.bin";
  const ChildResult r = in_child([&] {
    struct rlimit lim {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    std::vector<char> block(8192, 'x');
    const ssize_t first = write(fd, block.data(), block.size());  // short: up to the limit
    const ssize_t second = write(fd, block.data(), block.size());
    _exit(first == 4096 && second < 0 && errno == EFBIG ? 0 : 5);
  });
  std::remove(path.c_str());
  ASSERT_TRUE(WIFEXITED(r.status)) << "killed by signal " << WTERMSIG(r.status);
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
}

TEST_F(Signals, RestoreBringsBackThePreviousAction) {
  restore_stop_handlers();
  struct sigaction current {};
  sigaction(SIGUSR1, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  sigaction(SIGXFSZ, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
  install_stop_handlers();
  sigaction(SIGUSR1, nullptr, &current);
  EXPECT_NE(current.sa_handler, SIG_DFL);
  sigaction(SIGXFSZ, nullptr, &current);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
}

TEST(SignalsMessage, SaysWhatArrivedHowManyAreDoneAndHowToResume) {
  EXPECT_EQ(interrupted_message(SIGUSR1, 40, 100, "out.jsonl"),
            "stopped by SIGUSR1: 40 of 100 requests are done in 'out.jsonl'; rerun the same command to resume "
            "the remaining 60 (exit status 75)");
  EXPECT_EQ(kExitInterrupted, 75);
  EXPECT_EQ(signal_name(SIGALRM), "signal " + std::to_string(SIGALRM));
}

}  // namespace
}  // namespace conveyor
