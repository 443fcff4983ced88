// SPDX-License-Identifier: BSD-3-Clause
// Allgather in two levels: each node gathers its ranks' blocks on its leader,
// the leaders allgather the node runs along a ring, and each leader
// broadcasts the whole result within its node. The network carries one
// message per node pair instead of one per rank pair.
#include <cstring>

#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), p = s.ranks, nodes = s.nodes;
  const double ppn = s.max_ranks_per_node, per_node = n / p * ppn;
  return (ppn - 1) * m.intra.alpha + per_node * m.intra.beta + (nodes - 1) * m.inter.alpha +
         (nodes - 1) / nodes * n * m.inter.beta + ceil_log2(s.max_ranks_per_node) * (m.intra.alpha + n * m.intra.beta);
}

int run(const Args& a, const Hierarchy& h) {
  place_own_block(a, h.rank);
  const int64_t b = a.count;
  auto* out = static_cast<std::byte*>(a.rbuf);
  // Node runs: node k's blocks, in local order, at node_first[k] blocks into `runs`.
  Blocks nodes;
  nodes.counts.resize(static_cast<size_t>(h.node_count));
  nodes.offsets.resize(static_cast<size_t>(h.node_count) + 1);
  int64_t first = 0;
  for (int k = 0; k < h.node_count; ++k) {
    const size_t kk = static_cast<size_t>(k);
    nodes.offsets[kk] = (h.node_consecutive ? h.node_ranks[kk][0] : first) * b;
    nodes.counts[kk] = h.node_size_of(k) * b;
    first += h.node_size_of(k);
  }
  nodes.offsets[static_cast<size_t>(h.node_count)] = static_cast<int64_t>(h.size) * b;
  // Consecutive nodes are already runs of rbuf; otherwise gather into node order and sort at the end.
  Scratch sorted;
  std::byte* runs = out;
  if (!h.node_consecutive && h.node_rank == 0) {
    sorted.reset(static_cast<size_t>(h.size * b));
    runs = sorted.data();
  }
  int made = MPI_SUCCESS;
  const MPI_Comm leaders = h.leaders(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  std::byte* my_run = runs + nodes.offsets[static_cast<size_t>(h.node_index)];
  VENEER_TRY(gather_linear(out + h.rank * b, my_run, b, MPI_BYTE, 1, h.node_comm(), Tag::allgather));
  if (h.node_rank == 0) {
    if (h.node_count > 1) VENEER_TRY(allgatherv_ring(runs, nodes, MPI_BYTE, 1, leaders, Tag::allgather));
    if (runs != out) {
      for (int x = 0; x < h.size && b > 0; ++x) {
        const size_t xx = static_cast<size_t>(x);
        const std::byte* from = runs + nodes.offsets[static_cast<size_t>(h.node_of_rank[xx])] + h.local_rank_of[xx] * b;
        std::memcpy(out + x * b, from, static_cast<size_t>(b));
      }
    }
  }
  return bcast_binomial(out, h.size * b, MPI_BYTE, 0, h.node_comm(), Tag::allgather);
}

}  // namespace

extern const Algorithm allgather_two_level_algorithm{.collective = Collective::allgather,
                                                     .name = "two_level",
                                                     .needs = {},
                                                     .hierarchical = true,
                                                     .predicted_seconds = predicted,
                                                     .run = run};

}  // namespace veneer::algorithms
