// SPDX-License-Identifier: BSD-3-Clause
// Allreduce in three levels: reduce onto each node's leader, allreduce among
// the leaders, broadcast within each node. Only one rank per node talks to
// the network, with the whole vector: for small and medium messages across
// nodes. Operands combine in node order, which is rank order when nodes are
// runs of consecutive ranks. The leaders' result is final before it is
// broadcast, so every rank holds the same bits.
#include "algorithms/primitives.h"

namespace veneer::algorithms {

// Whether the leaders (or the lanes) allreduce by halving rather than doubling;
// a pure function of arguments all of them share.
bool inter_node_uses_halving(int64_t bytes, int64_t count, int ranks) {
  return ranks > 2 && bytes >= (int64_t{32} << 10) && count >= ranks;
}

double inter_node_allreduce_seconds(double bytes, int64_t count, int ranks, const LinkCost& l) {
  if (ranks <= 1) return 0;
  const int pof2 = floor_pow2(ranks), steps = ceil_log2(pof2);
  double t = 0;
  if (inter_node_uses_halving(static_cast<int64_t>(bytes), count, ranks))
    t = 2 * steps * l.alpha + (pof2 - 1.0) / pof2 * bytes * (2 * l.beta + l.gamma);
  else t = steps * (l.alpha + bytes * (l.beta + l.gamma));
  if (pof2 != ranks) t += 2 * (l.alpha + bytes * l.beta) + bytes * l.gamma;
  return t;
}

int inter_node_allreduce(void* buf, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag) {
  int p = 1;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  if (inter_node_uses_halving(count * r.type.size(), count, p))
    return allreduce_rabenseifner(buf, buf, count, r, comm, tag);
  return allreduce_recursive_doubling(buf, buf, count, r, comm, tag);
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const int node_steps = ceil_log2(s.max_ranks_per_node);
  return node_steps * (m.intra.alpha + n * (m.intra.beta + m.intra.gamma)) +
         inter_node_allreduce_seconds(n, s.count, s.nodes, m.inter) + node_steps * (m.intra.alpha + n * m.intra.beta);
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const bool leader = h.node_rank == 0;
  int made = MPI_SUCCESS;
  const MPI_Comm leaders = h.leaders(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  VENEER_TRY(
      reduce_binomial_to_zero(input_of(a), leader ? a.rbuf : nullptr, a.count, *r, h.node_comm(), Tag::allreduce));
  if (leader && h.node_count > 1) VENEER_TRY(inter_node_allreduce(a.rbuf, a.count, *r, leaders, Tag::allreduce));
  return bcast_binomial(a.rbuf, a.count, r->type.handle, 0, h.node_comm(), Tag::allreduce);
}

}  // namespace

extern const Algorithm allreduce_two_level_algorithm{.collective = Collective::allreduce,
                                                     .name = "two_level",
                                                     .needs = {.order = OpOrder::node_order},
                                                     .hierarchical = true,
                                                     .predicted_seconds = predicted,
                                                     .run = run};

}  // namespace veneer::algorithms
