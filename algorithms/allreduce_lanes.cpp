// SPDX-License-Identifier: BSD-3-Clause
// Multi-leader allreduce over lanes: reduce-scatter within each node (local
// rank i gets block i), then every lane (the ranks with local index i, one per
// node) allreduces its block across nodes at the same time as the other lanes,
// then an allgather within each node. All of a node's ranks drive the network
// at once, each with 1/L of the vector: for large messages across nodes.
// Needs the same number of ranks on every node, or a lane would miss nodes.
#include <algorithm>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), lanes = s.max_ranks_per_node;
  // Concurrent lanes share the node's network: beyond nic_streams they queue.
  LinkCost shared = m.inter;
  shared.beta *= std::max(1.0, lanes / std::max(1, m.nic_streams));
  const double intra = (lanes - 1) * m.intra.alpha + (lanes - 1) / lanes * n * m.intra.beta;
  return intra + (lanes - 1) / lanes * n * m.intra.gamma +
         inter_node_allreduce_seconds(n / lanes, s.count / s.max_ranks_per_node, s.nodes, shared) + intra;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const Blocks blocks = Blocks::even(a.count, h.node_size);
  const size_t lane = static_cast<size_t>(h.node_rank);
  void* mine = element(a.rbuf, blocks.offsets[lane], r->type);
  int made = MPI_SUCCESS;
  const MPI_Comm lanes = h.lanes(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  VENEER_TRY(reduce_scatter_pairwise(input_of(a), mine, blocks, *r, h.node_comm(), Tag::allreduce));
  if (h.node_count > 1) VENEER_TRY(inter_node_allreduce(mine, blocks.counts[lane], *r, lanes, Tag::allreduce));
  return allgatherv_ring(a.rbuf, blocks, r->type.handle, r->type.extent(), h.node_comm(), Tag::allreduce);
}

}  // namespace

extern const Algorithm allreduce_lanes_algorithm{.collective = Collective::allreduce,
                                                 .name = "lanes",
                                                 .needs = {.order = OpOrder::node_order, .equal_ranks_per_node = true},
                                                 .hierarchical = true,
                                                 .predicted_seconds = predicted,
                                                 .run = run};

}  // namespace veneer::algorithms
