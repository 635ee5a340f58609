// Content identity of a checkpoint's files: XXH3-128 over fixed 16 MiB chunks, the file digest
// being XXH3-128 of the chunk digests in order. Chunks are independent, so any set of ranks and
// threads can hash disjoint chunks while the weights load and one place combines them; the digest
// depends only on the bytes, never on how the work was split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

constexpr uint64_t kDigestChunkBytes = uint64_t{16} << 20;
// Names the scheme in manifests, so a later change of chunk size or hash is seen as such.
constexpr const char* kDigestScheme = "xxh3-128/16MiB";

struct ChunkDigest {
  uint64_t high = 0, low = 0;
  bool operator==(const ChunkDigest& o) const { return high == o.high && low == o.low; }
};

// A weight file of a checkpoint, as the manifest records it.
struct WeightFileInfo {
  std::string path;    // as the checkpoint names it
  uint64_t size = 0;   // bytes
  std::string digest;  // kDigestScheme hex (32 digits), "" when not computed
};

// The files a checkpoint reads from (a .gguf, model.safetensors or the index's shards), with sizes,
// in a fixed order; parses headers only.
std::vector<WeightFileInfo> list_weight_files(const std::string& model_path);

uint64_t digest_chunk_count(uint64_t file_size);  // at least 1 (an empty file has one empty chunk)
// Digest of chunk `index` of the `size`-byte file mapped at `data`.
ChunkDigest digest_chunk(const uint8_t* data, uint64_t size, uint64_t index);
// The file digest (32 hex digits) from all its chunk digests, in chunk order.
std::string combine_chunk_digests(const std::vector<ChunkDigest>& chunks);
// The whole file on this process with `threads` threads; for tools, tests and the benchmark.
std::string digest_file(const std::string& path, int threads = 1);

// One chunk of the flat list over all files: which file and which of its chunks.
struct ChunkRef {
  size_t file = 0;
  uint64_t chunk = 0;
};
// Every chunk of `files` in order (file by file); worker w of n takes entries w, w + n, ...
std::vector<ChunkRef> all_chunks(const std::vector<WeightFileInfo>& files);

}  // namespace conveyor
