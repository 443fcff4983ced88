// SPDX-License-Identifier: BSD-3-Clause
/* A minimal PMPI tool, as profilers are written: it counts a few calls and
 * forwards them with PMPI_*. Used to prove Veneer stacks with such tools in
 * either LD_PRELOAD order. */
#include <mpi.h>
#include <stdio.h>

static long g_send, g_recv, g_barrier;

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  ++g_send;
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  ++g_recv;
  return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int MPI_Barrier(MPI_Comm comm) {
  ++g_barrier;
  return PMPI_Barrier(comm);
}

int MPI_Finalize(void) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("counting-tool: rank %d send=%ld recv=%ld barrier=%ld\n", rank, g_send, g_recv, g_barrier);
  fflush(stdout);
  return PMPI_Finalize();
}
