// The report of an error that ends the run: the message without the check's expression and with the
// rank and host (the expression and file:line only with --debug); a filesystem error names the path and
// its problem with status 1, never "internal error"; --debug is taken out of argv wherever it is.
#include "launch/fatal_error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <system_error>

#include "runtime/core/error.h"

namespace conveyor {
namespace {

std::exception_ptr failed_check() {
  try {
    const int heads = 9;
    CONVEYOR_CHECK(heads % 2 == 0, "tensor-parallel size 2 does not divide the ", heads, " heads");
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

TEST(FatalError, OneLineWithRankAndHostAndTheExpressionOnlyWithDebug) {
  const FatalReport plain = describe_fatal(failed_check(), /*debug=*/false);
  EXPECT_EQ(plain.status, 1);
  EXPECT_EQ(plain.line.rfind("conveyor: error: tensor-parallel size 2 does not divide the 9 heads [rank ", 0), 0u)
      << plain.line;
  EXPECT_NE(plain.line.find(" on host "), std::string::npos) << plain.line;
  EXPECT_EQ(plain.line.find("check failed"), std::string::npos) << plain.line;
  EXPECT_EQ(plain.line.find('\n'), std::string::npos) << plain.line;
  const FatalReport debug = describe_fatal(failed_check(), /*debug=*/true);
  EXPECT_NE(debug.line.find("fatal_error_test.cpp:"), std::string::npos) << debug.line;
  EXPECT_NE(debug.line.find("check failed: heads % 2 == 0"), std::string::npos) << debug.line;
}

TEST(FatalError, FilesystemErrorsNameThePathAndTheProblem) {
  const std::error_code denied = std::make_error_code(std::errc::permission_denied);
  const FatalReport r = describe_fatal(
      std::make_exception_ptr(std::filesystem::filesystem_error("status", "/models/secret/m.gguf", denied)), false);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.line.find("cannot use '/models/secret/m.gguf': Permission denied"), std::string::npos) << r.line;
  EXPECT_EQ(r.line.find("internal"), std::string::npos) << r.line;
  EXPECT_EQ(describe_fatal(std::make_exception_ptr(std::logic_error("bug")), false).status, 70);
}

TEST(FatalError, DebugFlagIsTakenOutOfArgv) {
  char a0[] = "conveyor", a1[] = "plan", a2[] = "--debug", a3[] = "-tp", a4[] = "2";
  char* argv[] = {a0, a1, a2, a3, a4, nullptr};
  int argc = 5;
  EXPECT_TRUE(take_debug_flag(&argc, argv));
  ASSERT_EQ(argc, 4);
  EXPECT_STREQ(argv[2], "-tp");
  EXPECT_EQ(argv[4], nullptr);
  EXPECT_FALSE(take_debug_flag(&argc, argv));
}

}  // namespace
}  // namespace conveyor
