// SPDX-License-Identifier: BSD-3-Clause
#include "topology/mpi_error.h"

#include "support/log.h"

namespace veneer::topology {

bool failed(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return false;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (PMPI_Error_string(rc, text, &length) != MPI_SUCCESS) text[0] = '\0';
  log(LogLevel::warn, "topology: %s failed: %s (error code %d)", call, text[0] ? text : "unknown error", rc);
  return true;
}

}  // namespace veneer::topology
