// Fatal error reports (see fatal_error.h).
#include "launch/fatal_error.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/dist/launch_env.h"
#include "runtime/dist/mpi_runtime.h"

namespace conveyor {
namespace {

// Before MPI is up the identity has no rank; the launcher's environment has it (0 without a launcher).
std::string where() {
  if (process_identity().rank < 0) set_process_identity(std::max(0, launcher_rank()), process_identity().device);
  return where_am_i();
}

}  // namespace

bool take_debug_flag(int* argc, char** argv) {
  bool found = false;
  int kept = 0;
  for (int i = 0; i < *argc; ++i) {
    if (i > 0 && !std::strcmp(argv[i], "--debug")) {
      found = true;
      continue;
    }
    argv[kept++] = argv[i];
  }
  *argc = kept;
  argv[kept] = nullptr;
  return found;
}

FatalReport describe_fatal(const std::exception_ptr& error, bool debug) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    std::string line = "conveyor: error: " + e.message() + " [" + where() + "]";
    if (debug) {
      line += "\n  at " + std::string(e.file()) + ":" + std::to_string(e.line());
      if (!e.expression().empty()) line += ", check failed: " + e.expression();
    }
    return {line, 1};
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave (model, output, ...) that cannot be used: name it and the problem.
    std::string line = "conveyor: error: cannot use '" + e.path1().string() + "': " + e.code().message();
    if (!e.path2().empty()) line += " (and '" + e.path2().string() + "')";
    line += "; check that the path exists and that its directories can be read [" + where() + "]";
    if (debug) line += "\n  " + std::string(e.what());
    return {line, 1};
  } catch (const std::exception& e) {
    return {"conveyor: internal error [" + where() + "]: " + e.what(), 70};
  } catch (...) {
    return {"conveyor: internal error [" + where() + "]: unknown exception", 70};
  }
}

void report_fatal_and_exit(const std::exception_ptr& error, bool debug) {
  const FatalReport report = describe_fatal(error, debug);
  if (launcher_world_size() > 1 && std::max(0, launcher_rank()) != 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(kPeerReportDelaySeconds));
  std::fprintf(stderr, "%s\n", report.line.c_str());
  std::fflush(stderr);
  abort_job(report.status);
}

}  // namespace conveyor
