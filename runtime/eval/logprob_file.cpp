// The --kl-divergence-base file (see logprob_file.h). Every read is checked, and a header that does
// not describe the file's size is refused, so a truncated base is an error, not a KLD of garbage.
#include "runtime/eval/logprob_file.h"

#include <cstring>

#include "kernels/dtype.h"
#include "runtime/core/error.h"

namespace conveyor {

namespace {
constexpr char kMagic[8] = {'C', 'V', 'Y', 'L', 'O', 'G', 'P', '1'};
constexpr uint32_t kVersion = 1;

template <typename T>
void put(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(std::ifstream& in, const std::string& path, const char* field) {
  T v{};
  in.read(reinterpret_cast<char*>(&v), sizeof v);
  CONVEYOR_CHECK(in.good(), path, ": truncated KL-divergence base file (reading ", field, ")");
  return v;
}
}  // namespace

LogprobFileWriter::LogprobFileWriter(const std::string& path, const LogprobFileHeader& header,
                                     const std::vector<int32_t>& chunk_tokens)
    : path_(path), header_(header), out_(path, std::ios::binary | std::ios::trunc) {
  CONVEYOR_CHECK(out_.good(), "cannot write the KL-divergence base file ", path);
  CONVEYOR_CHECK(chunk_tokens.size() == static_cast<size_t>(header.n_chunks) * header.ctx, "internal: ",
                 chunk_tokens.size(), " chunk tokens for ", header.n_chunks, " chunks of ", header.ctx);
  out_.write(kMagic, sizeof kMagic);
  for (uint32_t v : {kVersion, header.vocab, header.ctx, header.n_chunks, header.scored_per_chunk, header.first_scored})
    put(out_, v);
  put(out_, header.bos);
  put(out_, static_cast<uint32_t>(header.model.size()));
  out_.write(header.model.data(), static_cast<std::streamsize>(header.model.size()));
  out_.write(reinterpret_cast<const char*>(chunk_tokens.data()),
             static_cast<std::streamsize>(chunk_tokens.size() * sizeof(int32_t)));
}

void LogprobFileWriter::write_chunk(const std::vector<float>& rows) {
  const size_t n = static_cast<size_t>(header_.scored_per_chunk) * header_.vocab;
  CONVEYOR_CHECK(rows.size() == n, "internal: chunk ", written_ + 1, " has ", rows.size(), " log-probabilities, expected ", n);
  CONVEYOR_CHECK(written_ < header_.n_chunks, "internal: more chunks than the header's ", header_.n_chunks);
  half_.resize(n);
  for (size_t i = 0; i < n; ++i) half_[i] = float_to_f16(rows[i]);
  out_.write(reinterpret_cast<const char*>(half_.data()), static_cast<std::streamsize>(n * sizeof(uint16_t)));
  CONVEYOR_CHECK(out_.good(), "writing ", path_, " failed (disk full?)");
  ++written_;
}

void LogprobFileWriter::close() {
  out_.flush();
  CONVEYOR_CHECK(out_.good() && written_ == header_.n_chunks, "writing ", path_, " failed after ", written_, " of ",
                 header_.n_chunks, " chunks");
  out_.close();
}

LogprobFileReader::LogprobFileReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  CONVEYOR_CHECK(in_.good(), "cannot read the KL-divergence base file ", path,
                 "; make it with a run of `conveyor perplexity --kl-divergence-base ", path, "`");
  char magic[8] = {};
  in_.read(magic, sizeof magic);
  CONVEYOR_CHECK(in_.good() && std::memcmp(magic, kMagic, sizeof magic) == 0, path,
                 " is not a conveyor KL-divergence base file (bad magic)");
  const uint32_t version = get<uint32_t>(in_, path, "version");
  CONVEYOR_CHECK(version == kVersion, path, ": version ", version, ", this conveyor reads version ", kVersion);
  header_.vocab = get<uint32_t>(in_, path, "vocab");
  header_.ctx = get<uint32_t>(in_, path, "ctx");
  header_.n_chunks = get<uint32_t>(in_, path, "n_chunks");
  header_.scored_per_chunk = get<uint32_t>(in_, path, "scored_per_chunk");
  header_.first_scored = get<uint32_t>(in_, path, "first_scored");
  header_.bos = get<int32_t>(in_, path, "bos");
  const uint32_t name_len = get<uint32_t>(in_, path, "model name length");
  CONVEYOR_CHECK(name_len < 65536 && header_.vocab > 0 && header_.ctx > 0, path, ": implausible header");
  header_.model.resize(name_len);
  in_.read(header_.model.data(), name_len);
  tokens_.resize(static_cast<size_t>(header_.n_chunks) * header_.ctx);
  in_.read(reinterpret_cast<char*>(tokens_.data()), static_cast<std::streamsize>(tokens_.size() * sizeof(int32_t)));
  CONVEYOR_CHECK(in_.good(), path, ": truncated KL-divergence base file (in the header or tokens)");
}

const std::vector<float>& LogprobFileReader::read_chunk() {
  CONVEYOR_CHECK(read_ < header_.n_chunks, path_, ": holds ", header_.n_chunks, " chunks; a chunk past them was asked for");
  const size_t n = static_cast<size_t>(header_.scored_per_chunk) * header_.vocab;
  half_.resize(n);
  in_.read(reinterpret_cast<char*>(half_.data()), static_cast<std::streamsize>(n * sizeof(uint16_t)));
  CONVEYOR_CHECK(in_.good(), path_, ": truncated in chunk ", read_ + 1, " of ", header_.n_chunks);
  rows_.resize(n);
  for (size_t i = 0; i < n; ++i) rows_[i] = f16_to_float(half_[i]);
  ++read_;
  return rows_;
}

}  // namespace conveyor
