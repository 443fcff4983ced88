// SPDX-License-Identifier: BSD-3-Clause
/* cluster_check HOSTS: proves that the pretend hosts of netns_cluster.sh are
 * hosts to MPI. HOSTS is the layout it was started with ("2,1": node0 runs
 * two ranks, node1 one). Every rank reports its hostname, the size of its
 * node communicator (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED) and how
 * many ranks' marker files it sees in /dev/shm; rank 0 prints one line per
 * rank and checks that
 *   - the ranks on host nodeI are exactly HOSTS[I] many,
 *   - every rank's node communicator holds exactly the ranks of its hostname,
 *   - every rank sees the markers of its own host only (a private /dev/shm).
 * Exit status 0 when all hold, 1 otherwise. */
#include <mpi.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NAME = 64, MAX_HOSTS = 256 };

struct Report {
  char host[NAME];
  int node_size;    /* size of the MPI_COMM_TYPE_SHARED communicator */
  int node_members; /* ranks of the node communicator with the same hostname as me */
  int markers_seen; /* marker files of this job visible in my /dev/shm */
};

static int parse_hosts(const char* text, int* slots) {
  int n = 0;
  const char* p = text;
  while (*p && n < MAX_HOSTS) {
    char* end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 4096) return -1;
    slots[n++] = (int)v;
    if (*end == ',') ++end;
    else if (*end) return -1;
    p = end;
  }
  return n;
}

static void marker_path(char* out, size_t size, int rank, int tag) {
  snprintf(out, size, "/dev/shm/veneer-cluster-check-%d-%d", tag, rank);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int slots[MAX_HOSTS];
  const int hosts = argc > 1 ? parse_hosts(argv[1], slots) : -1;

  struct Report me;
  memset(&me, 0, sizeof me);
  if (gethostname(me.host, NAME - 1) != 0) strcpy(me.host, "?");

  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &me.node_size);

  /* Hostnames of my node communicator's members. */
  char* names = malloc((size_t)me.node_size * NAME);
  MPI_Allgather(me.host, NAME, MPI_CHAR, names, NAME, MPI_CHAR, node);
  for (int i = 0; i < me.node_size; ++i) me.node_members += strcmp(names + (size_t)i * NAME, me.host) == 0;
  free(names);

  /* Marker files: one per rank, named by a tag every rank shares. */
  int tag = (int)getpid();
  MPI_Bcast(&tag, 1, MPI_INT, 0, MPI_COMM_WORLD);
  char path[128];
  marker_path(path, sizeof path, rank, tag);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  if (fd >= 0) close(fd);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) {
    marker_path(path, sizeof path, r, tag);
    me.markers_seen += access(path, F_OK) == 0;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  marker_path(path, sizeof path, rank, tag);
  unlink(path);

  struct Report* all = rank == 0 ? malloc(sizeof(struct Report) * (size_t)size) : NULL;
  MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, MPI_COMM_WORLD);

  int ok = 1;
  if (rank == 0) {
    if (hosts < 1) {
      fprintf(stderr, "cluster_check: expected a host layout like 2,1 as the argument\n");
      ok = 0;
    }
    int expected_ranks = 0;
    for (int h = 0; h < hosts; ++h) expected_ranks += slots[h];
    if (hosts >= 1 && expected_ranks != size) {
      fprintf(stderr, "cluster_check: %d ranks, but the layout %s has %d\n", size, argv[1], expected_ranks);
      ok = 0;
    }
    for (int r = 0; r < size; ++r) {
      const struct Report* x = &all[r];
      int same_host = 0;
      for (int s = 0; s < size; ++s) same_host += strcmp(all[s].host, x->host) == 0;
      const int good = x->node_size == same_host && x->node_members == same_host && x->markers_seen == same_host;
      printf("rank %d host %s node_size %d ranks_on_host %d shm_markers_seen %d%s\n", r, x->host, x->node_size,
             same_host, x->markers_seen, good ? "" : "  <-- WRONG");
      ok = ok && good;
    }
    for (int h = 0; h < hosts; ++h) {
      char name[NAME];
      snprintf(name, sizeof name, "node%d", h);
      int count = 0;
      for (int r = 0; r < size; ++r) count += strcmp(all[r].host, name) == 0;
      if (count != slots[h]) {
        fprintf(stderr, "cluster_check: host %s runs %d ranks, expected %d\n", name, count, slots[h]);
        ok = 0;
      }
    }
    printf("cluster_check: %s (%d ranks on %d hosts)\n", ok ? "OK" : "FAILED", size, hosts);
    free(all);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Comm_free(&node);
  MPI_Finalize();
  return ok ? 0 : 1;
}
