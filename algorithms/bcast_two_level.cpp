// SPDX-License-Identifier: BSD-3-Clause
// Broadcast in two levels: among the node leaders first (the root hands the
// message to its leader if it is not one), then within every node. The
// message crosses the network once per node instead of once per rank.
#include <algorithm>

#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

bool leaders_scatter(int64_t bytes, int nodes) { return nodes > 2 && bytes >= (int64_t{512} << 10); }

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), nodes = s.nodes;
  const double inter = leaders_scatter(s.bytes, s.nodes) ? (ceil_log2(s.nodes) + nodes - 1) * m.inter.alpha +
                                                               2 * (nodes - 1) / nodes * n * m.inter.beta
                                                         : ceil_log2(s.nodes) * (m.inter.alpha + n * m.inter.beta);
  return inter + ceil_log2(s.max_ranks_per_node) * (m.intra.alpha + n * m.intra.beta);
}

int run(const Args& a, const Hierarchy& h) {
  const int root_node = h.node_of_rank[static_cast<size_t>(a.root)];
  const int root_leader = h.node_ranks[static_cast<size_t>(root_node)][0];
  int made = MPI_SUCCESS;
  const MPI_Comm leaders = h.leaders(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  if (a.root != root_leader) {
    if (h.rank == a.root) VENEER_TRY(send(a.rbuf, a.count, MPI_BYTE, root_leader, Tag::bcast, h.comm()));
    if (h.rank == root_leader) VENEER_TRY(recv(a.rbuf, a.count, MPI_BYTE, a.root, Tag::bcast, h.comm()));
  }
  if (h.node_rank == 0 && h.node_count > 1) {
    if (leaders_scatter(a.count, h.node_count))
      VENEER_TRY(bcast_scatter_allgather(static_cast<std::byte*>(a.rbuf), a.count, root_node, leaders, Tag::bcast));
    else VENEER_TRY(bcast_binomial(a.rbuf, a.count, MPI_BYTE, root_node, leaders, Tag::bcast));
  }
  // On the root's node the root itself sends, so its buffer is never written.
  const int node_root = h.node_index == root_node ? h.local_rank_of[static_cast<size_t>(a.root)] : 0;
  return bcast_binomial(a.rbuf, a.count, MPI_BYTE, node_root, h.node_comm(), Tag::bcast);
}

}  // namespace

extern const Algorithm bcast_two_level_algorithm{.collective = Collective::bcast,
                                                 .name = "two_level",
                                                 .needs = {},
                                                 .hierarchical = true,
                                                 .predicted_seconds = predicted,
                                                 .run = run};

}  // namespace veneer::algorithms
