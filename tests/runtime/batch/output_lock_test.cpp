// Tests of one-job-per-output: a second writer on a locked output is refused naming the holder, the
// lock is free again once the first is gone, and a lock file whose holder died is taken over.
#include "runtime/batch/output_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/batch/output.h"
#include "runtime/core/error.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

BatchOutputOptions options_in(const std::string& dir) {
  std::string input = dir + "/in.jsonl";
  std::ofstream(input) << R"({"prompt": "a"})" << "\n";
  BatchOutputOptions o;
  o.output_path = dir + "/out.jsonl";
  o.fsync_interval = 0;
  o.manifest = make_manifest(input, "m", nlohmann::json{{"temperature", 0.0}});
  return o;
}

TEST(OutputLock, SecondWriterIsRefusedNamingTheHolder) {
  BatchOutputOptions o = options_in(testing::temp_dir("lock_second"));
  BatchOutputWriter first(o);
  std::string pid = "pid " + std::to_string(::getpid());
  EXPECT_NE(read_all(lock_path_for(o.output_path)).find(std::to_string(::getpid())), std::string::npos);
  try {
    BatchOutputWriter second(o);
    FAIL() << "two writers held one output";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(o.output_path), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("in use by another job"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(pid), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("another --output"), std::string::npos) << e.message();
  }
}

TEST(OutputLock, ARefusedJobWaitsForTheHoldersRecord) {
  const std::string out = testing::temp_dir("lock_late_record") + "/out.jsonl";
  const int fd = ::open(lock_path_for(out).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // a holder that has the lock but has not written its name yet
  std::thread late([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string rec = R"({"host": "n7", "pid": 4242, "slurm_job_id": "", "slurm_array": ""})" "\n";
    EXPECT_EQ(::pwrite(fd, rec.data(), rec.size(), 0), static_cast<ssize_t>(rec.size()));
  });
  std::string msg;
  try {
    OutputLock second(out);
  } catch (const Error& e) {
    msg = e.message();
  }
  late.join();
  ::close(fd);
  EXPECT_NE(msg.find("pid 4242 on host n7"), std::string::npos) << msg;
}

TEST(OutputLock, FreeAgainAfterTheHolderIsGone) {
  BatchOutputOptions o = options_in(testing::temp_dir("lock_release"));
  { BatchOutputWriter first(o); }
  {
    BatchOutputWriter again(o);  // destroyed: free
    again.close();
    BatchOutputWriter third(o);  // closed: free as well
  }
  OutputLock lock(o.output_path);
  EXPECT_TRUE(lock.held());
  EXPECT_FALSE(lock.took_over());  // a clean release leaves nothing to take over
}

TEST(OutputLock, StaleLockFileIsTakenOver) {
  BatchOutputOptions o = options_in(testing::temp_dir("lock_stale"));
  std::ofstream(lock_path_for(o.output_path))
      << R"({"host":"gone-host","pid":999999,"slurm_job_id":"4242","slurm_array":""})" << "\n";
  {
    OutputLock lock(o.output_path);
    EXPECT_TRUE(lock.took_over());
    EXPECT_NE(lock.previous_holder().find("pid 999999 on host gone-host (Slurm job 4242)"), std::string::npos)
        << lock.previous_holder();
    EXPECT_NE(read_all(lock.path()).find(std::to_string(::getpid())), std::string::npos);
  }
  std::ofstream(lock_path_for(o.output_path)) << "not json\n";
  BatchOutputWriter w(o);  // a writer takes it over the same way
  w.write_result(BatchResult{"a", Endpoint::kCompletions, "m", "x", {1}, FinishReason::kStop, 1, {}, 0});
  w.close();
  EXPECT_EQ(read_all(lock_path_for(o.output_path)), "");
}

TEST(OutputLock, NamesTheSlurmJob) {
  ::setenv("SLURM_JOB_ID", "777", 1);
  ::setenv("SLURM_ARRAY_JOB_ID", "770", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "7", 1);
  std::string who = this_lock_holder();
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_ARRAY_JOB_ID");
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  EXPECT_NE(who.find("(Slurm job 777, array task 770_7)"), std::string::npos) << who;
  EXPECT_EQ(this_lock_holder().find("Slurm"), std::string::npos);
}

}  // namespace
}  // namespace conveyor
