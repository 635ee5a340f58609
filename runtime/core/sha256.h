// SHA-256 (FIPS 180-4) of bytes and files, used to fingerprint a batch job's input in its manifest so
// that a resume against a changed input is refused. Written here rather than linking OpenSSL: it is
// small, needs no extra dependency, and speed is irrelevant next to model work (~hundreds of MB/s).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // The digest as 64 lowercase hex characters; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);  // one 64-byte block
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(const std::string& bytes);
// Hashes a whole file; throws conveyor::Error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace conveyor
