// Chunked XXH3-128 digests of weight files (see weight_digest.h). XXH3 runs at memory speed on one
// core (~20 GB/s from the page cache), so hashing costs little next to converting the same bytes.
#include "runtime/model/weight_digest.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <thread>

#include <xxhash.h>

#include "runtime/core/error.h"
#include "runtime/model/mmap_file.h"
#include "runtime/model/weights_source.h"

namespace conveyor {

std::vector<WeightFileInfo> list_weight_files(const std::string& model_path) {
  std::unique_ptr<WeightSource> source = open_weight_source(model_path);
  std::set<std::string> paths;
  for (const SourceTensor& t : source->tensors()) paths.insert(t.file);
  std::vector<WeightFileInfo> out;
  for (const std::string& p : paths) {
    struct stat st {};
    CONVEYOR_CHECK(::stat(p.c_str(), &st) == 0, "cannot stat weight file '", p, "'");
    out.push_back({p, static_cast<uint64_t>(st.st_size), ""});
  }
  return out;
}

uint64_t digest_chunk_count(uint64_t file_size) {
  return std::max<uint64_t>(1, (file_size + kDigestChunkBytes - 1) / kDigestChunkBytes);
}

ChunkDigest digest_chunk(const uint8_t* data, uint64_t size, uint64_t index) {
  uint64_t begin = index * kDigestChunkBytes;
  CONVEYOR_CHECK(begin <= size, "internal: digest chunk ", index, " starts past the ", size, "-byte file");
  uint64_t n = std::min(kDigestChunkBytes, size - begin);
  XXH128_hash_t h = XXH3_128bits(n ? data + begin : nullptr, static_cast<size_t>(n));
  return {h.high64, h.low64};
}

std::string combine_chunk_digests(const std::vector<ChunkDigest>& chunks) {
  // Canonical (big-endian) bytes, so the digest is the same on any host.
  std::vector<XXH128_canonical_t> bytes(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) XXH128_canonicalFromHash(&bytes[i], {chunks[i].low, chunks[i].high});
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size() * sizeof(XXH128_canonical_t));
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

std::string digest_file(const std::string& path, int threads) {
  MappedFile file(path);
  std::vector<ChunkDigest> chunks(digest_chunk_count(file.size()));
  int n = std::max(1, threads);
  std::vector<std::thread> pool;
  for (int w = 0; w < n; ++w) {
    pool.emplace_back([&, w] {
      for (size_t c = static_cast<size_t>(w); c < chunks.size(); c += static_cast<size_t>(n))
        chunks[c] = digest_chunk(file.data(), file.size(), c);
    });
  }
  for (auto& t : pool) t.join();
  return combine_chunk_digests(chunks);
}

std::vector<ChunkRef> all_chunks(const std::vector<WeightFileInfo>& files) {
  std::vector<ChunkRef> out;
  for (size_t f = 0; f < files.size(); ++f)
    for (uint64_t c = 0; c < digest_chunk_count(files[f].size); ++c) out.push_back({f, c});
  return out;
}

}  // namespace conveyor
