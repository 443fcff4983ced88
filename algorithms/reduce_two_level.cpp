// SPDX-License-Identifier: BSD-3-Clause
// Reduce in two levels: onto each node's leader, then among the leaders onto
// the root's node leader, which passes the result to the root if it is not
// the root itself. Operands combine in node order.
#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  double t = ceil_log2(s.max_ranks_per_node) * (m.intra.alpha + n * (m.intra.beta + m.intra.gamma)) +
             ceil_log2(s.nodes) * (m.inter.alpha + n * (m.inter.beta + m.inter.gamma));
  if (!s.commutative && s.nodes > 1) t += m.inter.alpha + n * m.inter.beta;
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const bool root = h.rank == a.root;
  const int root_node = h.node_of_rank[static_cast<size_t>(a.root)];
  const int root_leader = h.node_ranks[static_cast<size_t>(root_node)][0];
  const bool leader = h.node_rank == 0;
  int made = MPI_SUCCESS;
  const MPI_Comm leaders = h.leaders(&made);  // every rank: made on first use, collectively
  VENEER_TRY(made);
  // A leader's node result and its share of the final one; the root's own buffer where it can be.
  TempBuffer node_result(leader && !root ? a.count : 0, r->type);
  void* node_buf = root ? a.rbuf : node_result.data();
  VENEER_TRY(reduce_binomial_to_zero(root ? input_of(a) : a.sbuf, node_buf, a.count, *r, h.node_comm(), Tag::reduce));
  if (leader) {
    TempBuffer final_result(h.rank == root_leader && !root ? a.count : 0, r->type);
    void* out = root ? a.rbuf : final_result.data();
    VENEER_TRY(
        reduce_binomial(node_buf, h.rank == root_leader ? out : nullptr, a.count, *r, root_node, leaders, Tag::reduce));
    if (h.rank == root_leader && !root) return send(out, a.count, r->type.handle, a.root, Tag::reduce, h.comm());
  }
  if (root && !leader) return recv(a.rbuf, a.count, r->type.handle, root_leader, Tag::reduce, h.comm());
  return MPI_SUCCESS;
}

}  // namespace

extern const Algorithm reduce_two_level_algorithm{.collective = Collective::reduce,
                                                  .name = "two_level",
                                                  .needs = {.order = OpOrder::node_order},
                                                  .hierarchical = true,
                                                  .predicted_seconds = predicted,
                                                  .run = run};

}  // namespace veneer::algorithms
