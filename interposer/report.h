// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <mpi.h>

namespace veneer {
// Prints the end-of-run report (VENEER_REPORT): collective over MPI_COMM_WORLD.
void print_report();
}  // namespace veneer
