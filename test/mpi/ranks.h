// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// This process's rank in a communicator and its size (MPI_COMM_WORLD by
// default), for the MPI tests. Through PMPI: Veneer takes neither call over.
#include <mpi.h>

inline int rank_of(MPI_Comm c = MPI_COMM_WORLD) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}

inline int size_of(MPI_Comm c = MPI_COMM_WORLD) {
  int s = 0;
  PMPI_Comm_size(c, &s);
  return s;
}
