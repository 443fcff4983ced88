// SPDX-License-Identifier: BSD-3-Clause
// GoogleTest main for MPI tests: every rank runs every test; the process exit
// status is non-zero on every rank if any rank failed, so the launcher reports it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  if (rank != 0 && failed) std::fprintf(stderr, "rank %d: some tests FAILED\n", rank);
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
