// The --kl-divergence-base file: one perplexity run's full log-softmax at every scored position, so
// a later run (another dtype, FP8, another layout) is compared against it position by position.
// Layout, little endian: magic "CVYLOGP1", then u32 version (1), vocab, ctx, n_chunks,
// scored_per_chunk, first_scored, bos (as i32), model-name length, the name's bytes; then
// n_chunks * ctx i32 token ids (the chunks as run, BOS included); then per chunk, per scored
// position, vocab fp16 log-probabilities. fp16 keeps a 128k vocabulary at 256 KiB a position and
// rounds a log-probability by at most 2^-11 of its magnitude, far below the differences KLD measures.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace conveyor {

struct LogprobFileHeader {
  uint32_t vocab = 0;
  uint32_t ctx = 0;
  uint32_t n_chunks = 0;
  uint32_t scored_per_chunk = 0;
  uint32_t first_scored = 0;
  int32_t bos = -1;
  std::string model;
};

class LogprobFileWriter {
 public:
  // Writes the header and the chunks' tokens (n_chunks * ctx ids) at once.
  LogprobFileWriter(const std::string& path, const LogprobFileHeader& header, const std::vector<int32_t>& chunk_tokens);
  // One chunk's rows, scored_per_chunk x vocab fp32 log-probabilities, in chunk order.
  void write_chunk(const std::vector<float>& rows);
  // Flushes and checks that every chunk was written.
  void close();

 private:
  std::string path_;
  LogprobFileHeader header_;
  std::ofstream out_;
  uint32_t written_ = 0;
  std::vector<uint16_t> half_;
};

class LogprobFileReader {
 public:
  explicit LogprobFileReader(const std::string& path);
  const LogprobFileHeader& header() const { return header_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The next chunk's rows as fp32 (scored_per_chunk x vocab).
  const std::vector<float>& read_chunk();

 private:
  std::string path_;
  LogprobFileHeader header_;
  std::ifstream in_;
  std::vector<int32_t> tokens_;
  uint32_t read_ = 0;
  std::vector<uint16_t> half_;
  std::vector<float> rows_;
};

}  // namespace conveyor
