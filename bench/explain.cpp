// SPDX-License-Identifier: BSD-3-Clause
// veneer-explain: for a collective call shape, every algorithm Veneer knows
// with its predicted time and where that time comes from (measured,
// interpolated or extrapolated from the machine profile, fitted from its
// per-level costs, or the built-in defaults), or why it is not eligible, and
// the one it would choose. By default the shape is this job's communicator
// (run it under the same launcher, rank count and VENEER_* settings as the
// application); --ranks/--nodes describe another one, so one rank can read
// the profile for any job size. It also says when sends, receives and
// Alltoallv/w of non-contiguous data are taken over (the largest mean block,
// and whether the profile, the built-in default or the user set it) and, when
// the profile has them, the point-to-point and MPI_Pack timings behind that.
//
//   mpirun -np 16 veneer-explain allreduce 1M [bcast 64k ...]
//   veneer-explain p2p
//   veneer-explain --ranks 64 --nodes 8 allreduce 4k
//   veneer-explain --profile other.json allreduce 4k
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/measured.h"
#include "algorithms/select.h"
#include "algorithms/tuning.h"
#include "support/config.h"
#include "topology/profile.h"

namespace {

const char* const kUsage =
    "usage: veneer-explain [--profile FILE] [--ranks R [--nodes N] [--oversubscribed]] COLLECTIVE BYTES ...\n"
    "       veneer-explain [--profile FILE] p2p\n"
    "  COLLECTIVE: allreduce bcast reduce allgather reduce_scatter reduce_scatter_block alltoall\n"
    "  p2p: only the send/receive, Alltoallv/w and MPI_Pack take-over thresholds and their measurements\n"
    "  BYTES: the whole message, e.g. 8, 64k, 1M\n"
    "  --profile FILE    the machine profile to read (default: VENEER_PROFILE, else the cache path)\n"
    "  --ranks R         explain R ranks on N nodes (default 1) of equal size instead of this job\n";

// One measured table: block classes down, message sizes across.
void print_p2p_level(const char* name, const veneer::topology::P2pLevel& level) {
  std::printf("  %s: Veneer pays up to a mean block of %lld B; us per call, library / veneer (ratio)\n", name,
              static_cast<long long>(level.max_block));
  std::vector<int64_t> blocks, sizes;
  for (const auto& p : level.points) blocks.push_back(p.block), sizes.push_back(p.bytes);
  for (auto* v : {&blocks, &sizes}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  std::printf("    %8s", "block");
  for (int64_t bytes : sizes) std::printf(" %29lld", static_cast<long long>(bytes));
  std::printf("\n");
  for (int64_t block : blocks) {
    std::printf("    %8lld", static_cast<long long>(block));
    for (int64_t bytes : sizes) {
      auto at = std::find_if(level.points.begin(), level.points.end(),
                             [&](const auto& p) { return p.block == block && p.bytes == bytes; });
      if (at == level.points.end()) {
        std::printf(" %29s", "-");
        continue;
      }
      std::printf(" %9.2f / %7.2f (%5.2fx)%s", at->library.median * 1e6, at->veneer.median * 1e6,
                  at->library.median / at->veneer.median, block <= level.max_block ? "*" : " ");
    }
    std::printf("\n");
  }
}

// The take-over thresholds in force, and the profile's measurements behind them.
void print_p2p(const veneer::algorithms::ProfileInfo& info) {
  const veneer::Config& c = veneer::config();
  std::printf(
      "p2p take-over (non-contiguous host data): sends and receives %s, "
      "Alltoallv/w <= %lld B (%s)\n",
      c.send_rules ? "by the profile's tables per peer level (same node, other node)"
                   : ("with a mean block <= " + std::to_string(c.p2p_max_block) + " B (" +
                      std::string(veneer::origin_name(c.p2p_max_block_origin, "VENEER_P2P_MAX_BLOCK")) + ")")
                         .c_str(),
      static_cast<long long>(c.alltoall_max_block),
      std::string(veneer::origin_name(c.alltoall_max_block_origin, "VENEER_ALLTOALL_MAX_BLOCK")).c_str());
  const std::string pack_limit = c.pack_max_block == std::numeric_limits<int64_t>::max()
                                     ? std::string("any mean block")
                                     : "a mean block <= " + std::to_string(c.pack_max_block) + " B";
  std::printf("MPI_Pack/Unpack take-over: one contiguous run always (a memcpy); several runs with %s (%s)\n",
              pack_limit.c_str(),
              std::string(veneer::origin_name(c.pack_max_block_origin, "VENEER_PACK_MAX_BLOCK")).c_str());
  if (!info.loaded()) return;
  const veneer::topology::Fingerprint here = veneer::topology::current_fingerprint();
  const veneer::topology::ProfileCheck check = veneer::topology::read_profile(info.path, &here);
  if (!check.profile || !check.profile->p2p) {
    std::printf("  (the profile has no point-to-point measurements: calibrated by an older veneer-calibrate)\n");
    return;
  }
  const veneer::topology::P2pProfile& p2p = *check.profile->p2p;
  if (p2p.inter) std::printf("  between nodes decides (where measured); * taken over\n");
  if (p2p.intra) print_p2p_level("within a node (ping-pong, one way)", *p2p.intra);
  if (p2p.inter) print_p2p_level("between nodes (ping-pong, one way)", *p2p.inter);
  if (p2p.pack) print_p2p_level("MPI_Pack", *p2p.pack);
}

}  // namespace

int main(int argc, char** argv) {
  // Options first: --profile must be in place before MPI_Init, where the profile is loaded.
  int ranks = 0, nodes = 1;
  bool oversubscribed = false, bad = false, p2p_only = false;
  std::vector<std::pair<std::string, std::string>> calls;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--profile" && a + 1 < argc) setenv("VENEER_PROFILE", argv[++a], 1);
    else if (arg == "--ranks" && a + 1 < argc) ranks = std::atoi(argv[++a]);
    else if (arg == "--nodes" && a + 1 < argc) nodes = std::atoi(argv[++a]);
    else if (arg == "--oversubscribed") oversubscribed = true;
    else if (arg == "p2p") p2p_only = true;
    else if (arg.rfind("--", 0) == 0 || a + 1 >= argc) bad = true;
    else calls.emplace_back(arg, argv[++a]);
  }
  if (ranks < 0 || nodes < 1 || (ranks > 0 && (ranks < nodes || ranks % nodes != 0))) bad = true;
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (bad || (calls.empty() && !p2p_only)) {
    if (rank == 0) std::fputs(kUsage, stderr);
    MPI_Finalize();
    return 2;
  }
  namespace alg = veneer::algorithms;
  alg::collectives_init();
  // libveneer loaded the profile in MPI_Init; say which model answers.
  if (rank == 0) {
    std::printf("model: %s\n", alg::profile_info().describe().c_str());
    print_p2p(alg::profile_info());
    std::printf("\n");
  }
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
