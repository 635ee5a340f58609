// A weight file cut short (an interrupted download or copy) is refused when opened, naming the file,
// its size and the size its own header describes: safetensors and GGUF alike.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/model/gguf_file.h"
#include "runtime/model/safetensors_file.h"
#include "tests/runtime/model/formats_test_util.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// A copy of tests/data/formats/<rel> with its last `cut` bytes removed; returns (path, original size).
std::pair<std::string, uint64_t> truncated_copy(const std::string& rel, uint64_t cut) {
  std::string src = testing::data_path(rel);
  std::string dst = testing::temp_dir("truncated_" + fs::path(rel).stem().string()) + "/" + fs::path(rel).filename().string();
  fs::copy_file(src, dst);
  uint64_t size = fs::file_size(dst);
  fs::resize_file(dst, size - cut);
  return {dst, size};
}

TEST(TruncatedFiles, SafetensorsNamesBothSizes) {
  auto [path, size] = truncated_copy("formats/tiny_llama/model.safetensors", 100);
  testing::expect_error([&] { SafetensorsFile f(path); },
                        "safetensors file '" + path + "' is " + std::to_string(size - 100) +
                            " bytes but its header describes " + std::to_string(size) + " bytes; the file is truncated");
}

TEST(TruncatedFiles, GgufNamesBothSizes) {
  auto [path, size] = truncated_copy("formats/tiny_llama.gguf", 100);
  testing::expect_error([&] { GgufFile f(path); },
                        "GGUF file '" + path + "' is " + std::to_string(size - 100) + " bytes but its header describes " +
                            std::to_string(size) + " bytes");
}

}  // namespace
}  // namespace conveyor
