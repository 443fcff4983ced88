// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// topology/'s one error convention. Every PMPI_ call's return code is checked.
// A failure is logged (warn) with the call and the library's error string,
// and its MPI error code goes up: as the return value of a function that has
// no other result, else through an `int* rc` parameter beside the result
// (nullptr / MPI_COMM_NULL / an empty value then say "no result").
#include <mpi.h>

namespace veneer::topology {

// True when `rc` is not MPI_SUCCESS, after logging "topology: CALL failed: <why>".
bool failed(int rc, const char* call);

// Stores `rc` in *out when the caller asked for it; returns rc.
inline int report_to(int* out, int rc) {
  if (out) *out = rc;
  return rc;
}

}  // namespace veneer::topology
