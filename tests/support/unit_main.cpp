// gtest main for single-process tests (unit and GPU). A GPU test binary with no GPU present exits 77
// (ctest: skipped) unless CONVEYOR_REQUIRE_GPU=1, in which case it fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/support/gpu_presence.h"
#include "tests/support/test_support.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string self = argv[0];
  bool is_gpu_test = self.find("_gpu_") != std::string::npos;
  if (is_gpu_test && conveyor::testing::gpu_count() == 0) {
    if (conveyor::testing::gpu_required()) {
      std::fprintf(stderr, "FAIL: CONVEYOR_REQUIRE_GPU=1 but no CUDA device is visible\n");
      return 1;
    }
    std::fprintf(stderr, "no CUDA device: GPU tests not run (set CONVEYOR_REQUIRE_GPU=1 to fail instead)\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
