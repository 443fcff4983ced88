// SPDX-License-Identifier: BSD-3-Clause
// Reduce as Rabenseifner: reduce-scatter by recursive halving, then a
// binomial gather of the reduced blocks (to the first active rank, which
// passes the result on to the root). About twice the vector crosses the
// network instead of log2(p) times: for large messages. Rank order holds.
#include "algorithms/halving.h"

namespace veneer::algorithms {
namespace {

int reduce_scatter_gather(const void* input, void* output, int64_t count, const Reduction& r, int root, MPI_Comm comm,
                          Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  if (p == 1) return copy(output, input, count, r.type);
  Folding f(p, rank);
  const Blocks blocks = Blocks::even(count, p);
  TempBuffer acc(count, r.type), scratch(count, r.type);
  VENEER_TRY(copy(acc.data(), input, count, r.type));
  VENEER_TRY(fold_in(f, acc.data(), scratch.data(), count, r, comm, tag));
  if (f.newrank >= 0) {
    Window w;
    VENEER_TRY(halve(f, acc.data(), scratch.data(), blocks, r, comm, tag, w));
    VENEER_TRY(gather_to_first(f, acc.data(), blocks, r.type, comm, tag, w));
  }
  const int first = f.original(0);
  if (rank == first) {
    if (root == first) return copy(output, acc.data(), count, r.type);
    return send(acc.data(), count, r.type.handle, root, tag, comm);
  }
  if (rank == root) return recv(output, count, r.type.handle, first, tag, comm);
  return MPI_SUCCESS;
}

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const int pof2 = floor_pow2(s.ranks);
  double t = 0, part = n;
  for (int d = 1; d < pof2; d <<= 1) {
    const LinkCost& l = link_at_distance(s, m, d);
    part /= 2;
    t += 2 * l.alpha + part * (2 * l.beta + l.gamma);
  }
  const LinkCost& l = flat_link(s, m);
  if (pof2 != s.ranks) t += l.alpha + n * (l.beta + l.gamma);
  return t + l.alpha + n * l.beta;  // the hop to the root
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const bool root = h.rank == a.root;
  return reduce_scatter_gather(root ? input_of(a) : a.sbuf, root ? a.rbuf : nullptr, a.count, *r, a.root, h.comm(),
                               Tag::reduce);
}

}  // namespace

extern const Algorithm reduce_reduce_scatter_gather_algorithm{.collective = Collective::reduce,
                                                              .name = "reduce_scatter_gather",
                                                              .needs = {.order = OpOrder::rank_order},
                                                              .predicted_seconds = predicted,
                                                              .run = run};

}  // namespace veneer::algorithms
