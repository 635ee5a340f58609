// Shared by the format tests: where the real test model lives, file writing, and expected-message
// checks. The real model is never skipped: a missing file is a failure that says how to fetch it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/core/error.h"

namespace conveyor::testing {

inline std::string test_model_path() {
  if (const char* env = std::getenv("CONVEYOR_TEST_MODEL"); env && *env) return env;
  std::string cache;
  if (const char* c = std::getenv("CONVEYOR_CACHE"); c && *c) cache = c;
  else cache = std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/conveyor";
  return cache + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Fails the test (never skips) when the real model is absent.
#define CONVEYOR_REQUIRE_TEST_MODEL(path)                                                                   \
  do {                                                                                                      \
    if (!std::filesystem::exists(path))                                                                     \
      FAIL() << "test model '" << (path) << "' is missing: run scripts/fetch_test_model.sh (or set "        \
             << "CONVEYOR_TEST_MODEL)";                                                                     \
  } while (0)

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<float> v(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// Runs fn, expects conveyor::Error whose message contains `needle`; returns the message.
template <typename Fn>
std::string expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
  } catch (const conveyor::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << "message lacks '" << needle << "': " << msg;
    return msg;
  }
  ADD_FAILURE() << "expected conveyor::Error containing '" << needle << "', nothing was thrown";
  return "";
}

}  // namespace conveyor::testing
