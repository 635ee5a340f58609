// MappedFile (see mmap_file.h): open + fstat + mmap(PROT_READ, MAP_PRIVATE); the descriptor is closed
// right after mapping because the mapping keeps the file alive.
#include "runtime/model/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "runtime/core/error.h"

namespace conveyor {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  CONVEYOR_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno), "; check the path and permissions");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    CONVEYOR_THROW("cannot stat '", path, "': ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    CONVEYOR_THROW("'", path, "' is not a regular file; pass a model file or directory");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    CONVEYOR_CHECK(p != MAP_FAILED, "cannot mmap '", path, "' (", size_, " bytes): ", std::strerror(err));
    data_ = static_cast<const uint8_t*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace conveyor
