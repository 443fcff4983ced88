// SPDX-License-Identifier: BSD-3-Clause
// Reduce along a binomial tree: log2(p) steps, each rank combining its
// children's partial results into its own. With the tree rooted at rank 0 a
// partial result always covers a run of consecutive ranks (the child's run
// follows the parent's), so rank order holds; for a commutative op the tree
// is rooted at the root itself instead, saving the final hop.
#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

// Binomial reduce rooted at `root` (ranks renumbered relative to it): rank
// order when root is 0. output is written at root only.
int reduce_tree(const void* input, void* output, int64_t count, const Reduction& r, int root, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  const int me = (rank - root + p) % p;
  const void* acc = input;  // read-only until the first combination
  TempBuffer a, b;
  void* spare = nullptr;
  for (int mask = 1; mask < p; mask <<= 1) {
    if (me & mask) return send(acc, count, r.type.handle, (me - mask + root) % p, tag, comm);
    const int child = me + mask;
    if (child >= p) continue;
    if (!spare) {
      a = TempBuffer(count, r.type);
      b = TempBuffer(count, r.type);
      spare = a.data();
    }
    VENEER_TRY(recv(spare, count, r.type.handle, (child + root) % p, tag, comm));
    VENEER_TRY(reduce_local(acc, spare, count, r.type, r.op));  // mine op child's, into spare
    acc = spare;
    spare = acc == a.data() ? b.data() : a.data();
  }
  return copy(output, acc, count, r.type);
}

}  // namespace

int reduce_binomial_to_zero(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm,
                            Tag tag) {
  return reduce_tree(input, output, count, r, 0, comm, tag);
}

int reduce_binomial(const void* input, void* output, int64_t count, const Reduction& r, int root, MPI_Comm comm,
                    Tag tag) {
  if (r.commutative || root == 0) return reduce_tree(input, output, count, r, root, comm, tag);
  int rank = 0;
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  TempBuffer at_zero(rank == 0 ? count : 0, r.type);
  VENEER_TRY(reduce_tree(input, at_zero.data(), count, r, 0, comm, tag));
  if (rank == 0) return send(at_zero.data(), count, r.type.handle, root, tag, comm);
  if (rank == root) return recv(output, count, r.type.handle, 0, tag, comm);
  return MPI_SUCCESS;
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const LinkCost& l = flat_link(s, m);
  double t = ceil_log2(s.ranks) * (l.alpha + n * (l.beta + l.gamma));
  if (!s.commutative) t += l.alpha + n * l.beta;
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const bool root = h.rank == a.root;
  return reduce_binomial(root ? input_of(a) : a.sbuf, root ? a.rbuf : nullptr, a.count, *r, a.root, h.comm(),
                         Tag::reduce);
}

}  // namespace

extern const Algorithm reduce_binomial_algorithm{.collective = Collective::reduce,
                                                 .name = "binomial",
                                                 .needs = {.order = OpOrder::rank_order},
                                                 .predicted_seconds = predicted,
                                                 .run = run};

}  // namespace veneer::algorithms
