// The text behind CONVEYOR_MPI_CHECK (error.h): MPI's own error string and the code.
#include <mpi.h>

#include "runtime/core/error.h"

namespace conveyor {

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len) + " (code " + std::to_string(code) + ")";
}

}  // namespace conveyor
