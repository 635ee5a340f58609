// SHA-256 through OpenSSL's EVP interface (see sha256.h). Files are read in 4 MiB pieces so a large
// model file never has to fit in memory.
#include "runtime/core/sha256.h"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor {

namespace {
EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  CONVEYOR_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) == 1,
                 "OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_ctx(ctx_)); }

void Sha256::update(const void* data, size_t size) {
  CONVEYOR_CHECK(EVP_DigestUpdate(as_ctx(ctx_), data, size) == 1, "OpenSSL SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  CONVEYOR_CHECK(EVP_DigestFinal_ex(as_ctx(ctx_), md, &n) == 1 && n == 32, "OpenSSL SHA-256 final failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot open '", path, "' to hash it; check the path and its permissions");
  Sha256 h;
  std::vector<char> chunk(4 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    h.update(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  CONVEYOR_CHECK(in.eof(), "read error while hashing '", path, "'");
  return h.hex_digest();
}

}  // namespace conveyor
