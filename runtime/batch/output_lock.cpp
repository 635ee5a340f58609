// The batch output lock (see output_lock.h). The lock file's content is one JSON object
// {host, pid, slurm_job_id, slurm_array}; it only names the holder, the flock itself is the lock.
#include "runtime/batch/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

using nlohmann::json;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

json holder_record() {
  const std::string& host = process_identity().host;
  std::string array;
  if (!env_or_empty("SLURM_ARRAY_JOB_ID").empty()) {
    array = env_or_empty("SLURM_ARRAY_JOB_ID") + "_" + env_or_empty("SLURM_ARRAY_TASK_ID");
  }
  return {{"host", host.empty() ? std::string("?") : host},
          {"pid", static_cast<int64_t>(::getpid())},
          {"slurm_job_id", env_or_empty("SLURM_JOB_ID")},
          {"slurm_array", array}};
}

// A holder record in words; `text` is the lock file's content.
std::string describe_holder(const std::string& text) {
  if (text.empty()) return "a job that has not written its name yet";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return "an unknown holder (lock file content: '" + text + "')";
  std::string s = "pid " + j.value("pid", json(-1)).dump() + " on host " + j.value("host", std::string("?"));
  std::string job = j.value("slurm_job_id", std::string());
  std::string array = j.value("slurm_array", std::string());
  if (!job.empty()) s += " (Slurm job " + job + (array.empty() ? "" : ", array task " + array) + ")";
  return s;
}

std::string read_fd(int fd) {
  std::string text;
  char buf[512];
  off_t at = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
    if (text.size() > 4096) break;  // a holder record is short; do not read a huge foreign file
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

bool is_holder_record(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !j.is_discarded() && j.is_object() && j.contains("pid");
}

// The lock file's content as the holder leaves it: a holder writes its record just after it takes
// the lock, so a job refused in that moment waits up to 2 s for the record before calling it nameless.
std::string read_holder(int fd) {
  std::string text = read_fd(fd);
  for (int i = 0; i < 40 && !is_holder_record(text); ++i) {
    ::usleep(50 * 1000);
    text = read_fd(fd);
  }
  return text;
}

bool write_record(int fd) {
  std::string text = holder_record().dump() + "\n";
  if (::ftruncate(fd, 0) != 0) return false;
  ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
  return n == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
}

}  // namespace

std::string lock_path_for(const std::string& output_path) { return output_path + ".lock"; }

std::string this_lock_holder() { return describe_holder(holder_record().dump()); }

OutputLock::OutputLock(const std::string& output_path) : path_(lock_path_for(output_path)) {
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    CONVEYOR_THROW("creating the lock file '", path_, "' of the output '", output_path, "' failed: ",
                   std::strerror(errno), "; check that the directory exists and is writable");
  }
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    std::string holder = err == EWOULDBLOCK ? describe_holder(read_holder(fd)) : std::string();
    ::close(fd);
    if (err == EWOULDBLOCK) {
      CONVEYOR_THROW("the output '", output_path, "' is in use by another job: ", holder, " holds its lock '",
                     path_, "'. Two jobs on one output would run every request twice; wait for that job to "
                     "end (or cancel it), or give this job another --output");
    }
    CONVEYOR_THROW("locking '", path_, "' (the lock of the output '", output_path, "') failed: ",
                   std::strerror(err), "; the file system must support flock (on NFS mount with a lock "
                   "manager), or put the output on a local or parallel file system");
  }
  fd_ = fd;
  std::string left = read_fd(fd_);
  if (!left.empty()) {
    previous_holder_ = describe_holder(left);
    spdlog::warn("the previous holder of '{}' ({}) is gone without releasing it; taking the lock over", path_,
                 previous_holder_);
  }
  if (!write_record(fd_)) {
    int err = errno;
    release();
    CONVEYOR_THROW("writing the holder into the lock file '", path_, "' failed: ", std::strerror(err),
                   "; check that the directory is writable and has free space");
  }
}

OutputLock::OutputLock(OutputLock&& o) noexcept
    : path_(std::move(o.path_)), previous_holder_(std::move(o.previous_holder_)), fd_(o.fd_) {
  o.fd_ = -1;
}

OutputLock& OutputLock::operator=(OutputLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    previous_holder_ = std::move(o.previous_holder_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void OutputLock::release() {
  if (fd_ < 0) return;
  // Emptied while still held: the next holder then knows this job ended cleanly. The file itself
  // stays, since unlinking a flock'd file lets two jobs lock two different files of one name.
  if (::ftruncate(fd_, 0) == 0) (void)::fsync(fd_);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace conveyor
