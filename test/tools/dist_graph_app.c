// SPDX-License-Identifier: BSD-3-Clause
/* dist_graph_app [ROUNDS] [EXTRA_DUPS]: an unmodified MPI program that runs a
 * few collectives (Bcast, Allreduce, Allgather: what Veneer may take) and then
 * builds a distributed-graph topology with reordering, ROUNDS times, checking
 * the neighbours' data each time. EXTRA_DUPS duplicates MPI_COMM_WORLD that
 * many times first: issue 11's reproducer of the Open MPI 4.1 treematch hang
 * without Veneer (seen elsewhere; it did not hang on the project's 2-core
 * machine). Run by test/tools/dist_graph_test.sh.
 * Prints "dist_graph_app: verified ROUNDS rounds" on rank 0, exits 1 on a wrong value. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(int rank, const char* what, int round, long got, long want) {
  fprintf(stderr, "dist_graph_app: rank %d round %d: %s: got %ld, want %ld\n", rank, round, what, got, want);
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rounds = argc > 1 ? atoi(argv[1]) : 1;
  const int extra_dups = argc > 2 ? atoi(argv[2]) : 0;
  int bad = 0;

  MPI_Comm dups[64];
  for (int i = 0; i < extra_dups && i < 64; ++i) MPI_Comm_dup(MPI_COMM_WORLD, &dups[i]);

  for (int round = 0; round < rounds; ++round) { /* every rank runs every round: collectives stay matched */
    /* Collectives as an application does them, before building the topology. */
    double params[4] = {0, 0, 0, 0};
    if (rank == 0)
      for (int i = 0; i < 4; ++i) params[i] = 1.5 * (i + 1) + round;
    MPI_Bcast(params, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 4 && !bad; ++i) {
      const double want = 1.5 * (i + 1) + round;
      if (params[i] != want) bad = fail(rank, "bcast", round, (long)params[i], (long)want);
    }
    long mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size + 1) / 2) bad = fail(rank, "allreduce", round, sum, (long)size * (size + 1) / 2);
    int* ranks = malloc(sizeof(int) * (size_t)size);
    MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size && !bad; ++r)
      if (ranks[r] != r) bad = fail(rank, "allgather", round, ranks[r], r);
    free(ranks);

    /* A ring with weights, each rank giving its own edges; reorder=1 (treematch's path on Open MPI). */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int sources[1] = {rank}, degrees[1] = {2}, targets[2] = {left, right}, weights[2] = {10, 1};
    MPI_Comm graph;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, sources, degrees, targets, weights, MPI_INFO_NULL, 1, &graph);

    /* Every rank sends its world rank to its out-neighbours; what arrives must
     * be the world ranks of its in-neighbours, in the order the graph lists them. */
    int indegree = 0, outdegree = 0, weighted = 0;
    MPI_Dist_graph_neighbors_count(graph, &indegree, &outdegree, &weighted);
    int in[8], inw[8], out[8], outw[8];
    if (indegree > 8 || outdegree > 8) {
      bad = fail(rank, "degree", round, indegree, 2);
    } else {
      MPI_Dist_graph_neighbors(graph, indegree, in, inw, outdegree, out, outw);
      int grank = 0;
      MPI_Comm_rank(graph, &grank);
      int world_of[64];
      int* all = size <= 64 ? world_of : NULL;
      if (all) MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, graph); /* graph rank -> world rank */
      int got[8];
      MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, graph);
      if (indegree != 2 || outdegree != 2) bad = fail(rank, "in/out degree", round, indegree * 10 + outdegree, 22);
      for (int i = 0; i < indegree && all && !bad; ++i)
        if (got[i] != all[in[i]]) bad = fail(rank, "neighbour data", round, got[i], all[in[i]]);
      /* In-neighbours in world ranks are my left and right, in some order. */
      if (!bad && all) {
        int a = all[in[0]], b = all[in[1]];
        if (!((a == left && b == right) || (a == right && b == left)))
          bad = fail(rank, "in-neighbours", round, a * 1000L + b, left * 1000L + right);
      }
    }
    MPI_Comm_free(&graph);
  }
  for (int i = 0; i < extra_dups && i < 64; ++i) MPI_Comm_free(&dups[i]);
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !any) printf("dist_graph_app: verified %d rounds\n", rounds);
  MPI_Finalize();
  return any ? 1 : 0;
}
