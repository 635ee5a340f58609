// Published SHA-256 digests of weight files, where the file's origin gives one: a Hugging Face cache
// (snapshots/<rev>/<file> is a symlink to ../../blobs/<sha256> for LFS files, which is what
// huggingface_hub checks on download; small git files are named by sha1 and carry none), a
// <file>.sha256 beside it, or a SHA256SUMS in its directory (sha256sum's format).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace conveyor {

struct ExpectedSha256 {
  std::string hex;     // 64 lowercase hex digits
  std::string source;  // where it came from, for messages: "Hugging Face blob name ...", "SHA256SUMS:3"
};

// The blob's sha256 when `path` is a snapshot file of a Hugging Face cache whose blob is named by a
// SHA-256 (64 hex digits); nullopt otherwise.
std::optional<std::string> hf_cache_blob_sha256(const std::string& path);

// sha256sum output: "<64 hex>  <name>" or "<64 hex> *<name>" per line; blank lines and '#' comments
// skipped. Name -> lowercase digest; a malformed line throws naming origin and line.
std::map<std::string, std::string> parse_sha256sums(const std::string& text, const std::string& origin);

// The digest `path` should have: its HF cache blob name, else <path>.sha256, else the entry for its
// file name in SHA256SUMS beside it; nullopt when none of them exists.
std::optional<ExpectedSha256> expected_sha256(const std::string& path);

// Hashes `path` and throws, naming the file, the expected and the actual digest, when they differ.
void verify_sha256(const std::string& path, const ExpectedSha256& expected);

}  // namespace conveyor
