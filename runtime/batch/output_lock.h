// One job per batch output: an exclusive flock(2) on "<output>.lock", held for the job's whole life
// and taken before the output, error file or manifest is touched. flock is released by the kernel when
// the descriptor closes (also on kill -9), and works on NFSv4/Lustre/GPFS through their lock managers.
// The holder writes who it is (host, pid, Slurm job) into the file so a refused job can name it; a
// clean release empties the file, so content found on acquiring means the previous holder died.
#pragma once

#include <string>

namespace conveyor {

std::string lock_path_for(const std::string& output_path);  // "<output>.lock"

// "pid 123 on host gpu07 (Slurm job 456, array task 450_6)" for this process.
std::string this_lock_holder();

class OutputLock {
 public:
  OutputLock() = default;
  // Takes the lock on `output_path` or throws conveyor::Error naming the holder. A lock file left by
  // a holder that is gone is taken over with one warning.
  explicit OutputLock(const std::string& output_path);
  ~OutputLock() { release(); }
  OutputLock(OutputLock&& o) noexcept;
  OutputLock& operator=(OutputLock&& o) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  void release();  // empties the lock file and closes it; idempotent, never throws
  bool held() const { return fd_ >= 0; }
  bool took_over() const { return !previous_holder_.empty(); }
  const std::string& previous_holder() const { return previous_holder_; }  // "" when the file was free
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string previous_holder_;
  int fd_ = -1;
};

}  // namespace conveyor
