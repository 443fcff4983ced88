// veneer-explain: for a collective call shape, every algorithm Veneer knows
// with its predicted time (or why it is not eligible) and the one it would
// choose, on the communicator this job runs on (so run it under the same
// launcher, rank count and VENEER_* settings as the application).
//
//   mpirun -np 16 veneer-explain allreduce 1M [bcast 64k ...]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "algorithms/collectives.h"
#include "support/config.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 3 || (argc - 1) % 2 != 0) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: veneer-explain COLLECTIVE BYTES [COLLECTIVE BYTES ...]\n"
                   "  COLLECTIVE: allreduce bcast reduce allgather reduce_scatter reduce_scatter_block alltoall\n"
                   "  BYTES: the whole message, e.g. 8, 64k, 1M\n");
    MPI_Finalize();
    return 2;
  }
  veneer::algorithms::collectives_init();
  int status = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    auto c = veneer::algorithms::collective_from_name(argv[i]);
    auto bytes = veneer::parse_size(argv[i + 1]);
    if (!c || !bytes) {
      if (rank == 0) std::fprintf(stderr, "veneer-explain: cannot read '%s %s'\n", argv[i], argv[i + 1]);
      status = 2;
      continue;
    }
    const std::string text = veneer::algorithms::explain(*c, *bytes, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%s\n", text.c_str());
  }
  veneer::algorithms::collectives_finalize();
  MPI_Finalize();
  return status;
}
