// SHA-256 of bytes and files: the batch manifest's input fingerprint and the check of model files
// against a published digest (Hugging Face blob names, SHA256SUMS). OpenSSL's EVP does the work
// (SHA-NI where the CPU has it, ~2 GB/s), since a model file can be tens of gigabytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conveyor {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // The digest as 64 lowercase hex characters; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void* ctx_;  // EVP_MD_CTX, kept opaque so OpenSSL's headers stay out of every includer
};

std::string sha256_hex(const std::string& bytes);
// Hashes a whole file; throws conveyor::Error naming the path when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace conveyor
