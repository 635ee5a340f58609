// MappedFile: a whole file mapped read-only into memory. Parsers read through it so a rank touches
// only the pages of the tensors it loads. Invariant: data() is valid for size() bytes for the
// object's lifetime; a zero-length file maps to (nullptr, 0). Errors name the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace conveyor
