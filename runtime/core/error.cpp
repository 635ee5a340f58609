// Process identity and the exception type (see error.h).
#include "runtime/core/error.h"

#include <unistd.h>

namespace conveyor {

namespace {
ProcessIdentity& identity_storage() {
  static ProcessIdentity id = [] {
    ProcessIdentity p;
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) == 0) p.host = buf;
    return p;
  }();
  return id;
}
}  // namespace

const ProcessIdentity& process_identity() { return identity_storage(); }

void set_process_identity(int rank, int device) {
  identity_storage().rank = rank;
  identity_storage().device = device;
}

std::string where_am_i() {
  const ProcessIdentity& id = process_identity();
  std::string s = id.rank >= 0 ? "rank " + std::to_string(id.rank) : std::string("rank ?");
  s += " on host " + (id.host.empty() ? std::string("?") : id.host);
  if (id.device >= 0) s += " (device " + std::to_string(id.device) + ")";
  return s;
}

Error::Error(const std::string& message, const char* file, int line, std::string expression)
    : std::runtime_error(message + " [" + where_am_i() + ", " + file + ":" + std::to_string(line) + "]"),
      message_(message),
      expression_(std::move(expression)),
      file_(file),
      line_(line) {}

void throw_error(const std::string& message, const char* file, int line) {
  throw Error(message, file, line);
}

void throw_check_error(const char* expression, const std::string& message, const char* file, int line) {
  throw Error(message.empty() ? std::string("check failed: ") + expression : message, file, line, expression);
}

}  // namespace conveyor
