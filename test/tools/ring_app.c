// SPDX-License-Identifier: BSD-3-Clause
/* An ordinary MPI program that knows nothing of Veneer: it passes strided
 * columns around a ring, packs and unpacks them, and prints a checksum of what
 * it received. Its output must be the same with and without LD_PRELOAD. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 257
#define STRIDE 5
#define ROUNDS 10

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Datatype column;
  MPI_Type_vector(N, 1, STRIDE, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  double* out = malloc(sizeof(double) * N * STRIDE);
  double* in = malloc(sizeof(double) * N * STRIDE);
  int bad = 0;
  double checksum = 0.0;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int round = 0; round < ROUNDS; ++round) {
    for (int i = 0; i < N * STRIDE; ++i) {
      out[i] = rank * 1000000.0 + round * 1000.0 + i;
      in[i] = -1.0;
    }
    if (rank % 2 == 0) {
      MPI_Send(out, 1, column, right, round, MPI_COMM_WORLD);
      MPI_Recv(in, 1, column, left, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(in, 1, column, left, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(out, 1, column, right, round, MPI_COMM_WORLD);
    }
    for (int i = 0; i < N * STRIDE; ++i) {
      const double want = (i % STRIDE == 0) ? left * 1000000.0 + round * 1000.0 + i : -1.0;
      if (in[i] != want) ++bad;
      if (i % STRIDE == 0) checksum += in[i];
    }
    /* Pack and unpack round trip. */
    char packed[N * sizeof(double)];
    int pos = 0;
    MPI_Pack(out, 1, column, packed, (int)sizeof packed, &pos, MPI_COMM_WORLD);
    for (int i = 0; i < N * STRIDE; ++i) in[i] = 0.0;
    pos = 0;
    MPI_Unpack(packed, (int)sizeof packed, &pos, in, 1, column, MPI_COMM_WORLD);
    for (int i = 0; i < N * STRIDE; i += STRIDE)
      if (in[i] != out[i]) ++bad;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  double total = 0.0;
  int all_bad = 0;
  MPI_Reduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("ring_app: %d ranks, %d rounds, checksum %.1f, %s\n", size, ROUNDS, total,
           all_bad ? "MISMATCH" : "verified");
  free(out);
  free(in);
  MPI_Type_free(&column);
  MPI_Finalize();
  return all_bad ? 1 : 0;
}
