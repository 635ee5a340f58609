// The one exception type of conveyor and the checks that throw it.
// Every check is always compiled in (never a no-op) and records expression, file:line, rank, host
// and device, so a message from any rank of a large job says where it came from. Library code throws;
// only launch/ catches, logs once and aborts the job.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace conveyor {

// Where the process sits in the job; filled in once MPI and the device are known.
struct ProcessIdentity {
  int rank = -1;    // world rank, -1 before MPI is up
  int device = -1;  // CUDA device, -1 on the CPU backend
  std::string host;
};
const ProcessIdentity& process_identity();
void set_process_identity(int rank, int device);

// "rank 3 on host gpu07 (device 1)" — used as a prefix in every error and log line.
std::string where_am_i();

class Error : public std::runtime_error {
 public:
  // what() is the message plus " [rank .. on host .., file:line]"; expression is a failed check's
  // source text ("" for CONVEYOR_THROW), kept out of the message: users read the message, `--debug`
  // adds the expression.
  Error(const std::string& message, const char* file, int line, std::string expression = "");
  const std::string& message() const { return message_; }  // what was wrong: no expression, no location
  const std::string& expression() const { return expression_; }
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  std::string expression_;
  const char* file_;
  int line_;
};

[[noreturn]] void throw_error(const std::string& message, const char* file, int line);
// A failed CONVEYOR_CHECK: a check without a message reads "check failed: <expression>".
[[noreturn]] void throw_check_error(const char* expression, const std::string& message, const char* file, int line);

namespace detail {
// Builds a message from stream-able pieces: CONVEYOR_CHECK(x > 0, "x is ", x).
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

}  // namespace conveyor

#define CONVEYOR_THROW(...) ::conveyor::throw_error(::conveyor::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

#define CONVEYOR_CHECK(cond, ...)                                                           \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      ::conveyor::throw_check_error(#cond, ::conveyor::detail::concat(__VA_ARGS__), __FILE__, \
                                    __LINE__);                                              \
    }                                                                                       \
  } while (0)

#define CONVEYOR_MPI_CHECK(expr)                                                                   \
  do {                                                                                             \
    int conveyor_mpi_rc_ = (expr);                                                                 \
    if (conveyor_mpi_rc_ != 0) {                                                                   \
      ::conveyor::throw_error(::conveyor::detail::concat("MPI call failed: " #expr " — ",          \
                                                         ::conveyor::mpi_error_string(conveyor_mpi_rc_)), \
                              __FILE__, __LINE__);                                                 \
    }                                                                                              \
  } while (0)

namespace conveyor {
std::string mpi_error_string(int code);  // defined in mpi_check.cpp (needs mpi.h)
}
