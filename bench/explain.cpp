// veneer-explain: for a collective call shape, every algorithm Veneer knows
// with its predicted time and where that time comes from (measured,
// interpolated or extrapolated from the machine profile, fitted from its
// per-level costs, or the built-in defaults), or why it is not eligible, and
// the one it would choose. By default the shape is this job's communicator
// (run it under the same launcher, rank count and VENEER_* settings as the
// application); --ranks/--nodes describe another one, so one rank can read
// the profile for any job size.
//
//   mpirun -np 16 veneer-explain allreduce 1M [bcast 64k ...]
//   veneer-explain --ranks 64 --nodes 8 allreduce 4k
//   veneer-explain --profile other.json allreduce 4k
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/measured.h"
#include "algorithms/select.h"
#include "algorithms/tuning.h"
#include "support/config.h"

namespace {

const char* const kUsage =
    "usage: veneer-explain [--profile FILE] [--ranks R [--nodes N] [--oversubscribed]] COLLECTIVE BYTES ...\n"
    "  COLLECTIVE: allreduce bcast reduce allgather reduce_scatter reduce_scatter_block alltoall\n"
    "  BYTES: the whole message, e.g. 8, 64k, 1M\n"
    "  --profile FILE    the machine profile to read (default: VENEER_PROFILE, else the cache path)\n"
    "  --ranks R         explain R ranks on N nodes (default 1) of equal size instead of this job\n";

}  // namespace

int main(int argc, char** argv) {
  // Options first: --profile must be in place before MPI_Init, where the profile is loaded.
  int ranks = 0, nodes = 1;
  bool oversubscribed = false, bad = false;
  std::vector<std::pair<std::string, std::string>> calls;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--profile" && a + 1 < argc) setenv("VENEER_PROFILE", argv[++a], 1);
    else if (arg == "--ranks" && a + 1 < argc) ranks = std::atoi(argv[++a]);
    else if (arg == "--nodes" && a + 1 < argc) nodes = std::atoi(argv[++a]);
    else if (arg == "--oversubscribed") oversubscribed = true;
    else if (arg.rfind("--", 0) == 0 || a + 1 >= argc) bad = true;
    else calls.emplace_back(arg, argv[++a]);
  }
  if (ranks < 0 || nodes < 1 || (ranks > 0 && (ranks < nodes || ranks % nodes != 0))) bad = true;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (bad || calls.empty()) {
    if (rank == 0) std::fputs(kUsage, stderr);
    MPI_Finalize();
    return 2;
  }
  namespace alg = veneer::algorithms;
  alg::collectives_init();
  // libveneer loaded the profile in MPI_Init; say which model answers.
  if (rank == 0) std::printf("model: %s\n\n", alg::profile_info().describe().c_str());
  int status = 0;
  for (const auto& [name, size] : calls) {
    auto c = alg::collective_from_name(name);
    auto bytes = veneer::parse_size(size);
    if (!c || !bytes) {
      if (rank == 0) std::fprintf(stderr, "veneer-explain: cannot read '%s %s'\n", name.c_str(), size.c_str());
      status = 2;
      continue;
    }
    std::string text;
    if (ranks > 0) {
      alg::Shape s;
      s.collective = *c;
      s.bytes = *bytes;
      s.count = (*c == alg::Collective::allreduce || *c == alg::Collective::reduce ||
                 *c == alg::Collective::reduce_scatter || *c == alg::Collective::reduce_scatter_block)
                    ? *bytes / 8
                    : *bytes;  // as if doubles
      s.ranks = ranks;
      s.nodes = nodes;
      s.min_ranks_per_node = s.max_ranks_per_node = ranks / nodes;
      s.oversubscribed = oversubscribed;
      text = alg::explain(s, alg::Tuning::from_env(), alg::cost_model());
    } else {
      text = alg::explain(*c, *bytes, MPI_COMM_WORLD);
    }
    if (rank == 0) std::printf("%s\n", text.c_str());
  }
  alg::collectives_finalize();
  MPI_Finalize();
  return status;
}
