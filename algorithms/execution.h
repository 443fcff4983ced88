// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Execution: runs a chosen algorithm on a call (bytes for Bcast, Allgather
// and Alltoall, packed and unpacked around it), or the library's own
// collective. Every function returns an MPI error code.
#include <mpi.h>

#include "algorithms/algorithm.h"
#include "algorithms/collectives.h"

namespace veneer::algorithms {

// Runs `a` for `c` on h's private communicators, made here on first use (the
// library runs the call should it fail to make them).
int execute(const Algorithm& a, const Call& c, const Hierarchy& h);
// The library's own collective for `c` on comm (PMPI_*).
int run_library(const Call& c, MPI_Comm comm);

}  // namespace veneer::algorithms
