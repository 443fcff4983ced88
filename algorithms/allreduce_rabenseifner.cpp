// SPDX-License-Identifier: BSD-3-Clause
// Allreduce as Rabenseifner: reduce-scatter by recursive halving, then
// allgather by recursive doubling. Moves 2(p-1)/p of the vector instead of
// log2(p) times all of it: for large messages. Each block is reduced once, by
// one rank, and then copied, so all ranks hold the same bits.
#include "algorithms/halving.h"

namespace veneer::algorithms {

int allreduce_rabenseifner(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  VENEER_TRY(copy(output, input, count, r.type));
  if (p == 1 || count == 0) return MPI_SUCCESS;
  Folding f(p, rank);
  const Blocks blocks = Blocks::even(count, p);
  TempBuffer scratch(count, r.type);
  VENEER_TRY(fold_in(f, output, scratch.data(), count, r, comm, tag));
  if (f.newrank >= 0) {
    Window w;
    VENEER_TRY(halve(f, output, scratch.data(), blocks, r, comm, tag, w));
    VENEER_TRY(double_back(f, output, blocks, r.type, comm, tag, w));
  }
  return fold_out(f, output, count, r.type, comm, tag);
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const int pof2 = floor_pow2(s.ranks);
  double t = 0, part = n;
  for (int d = 1; d < pof2; d <<= 1) {
    const LinkCost& l = link_at_distance(s, m, d);
    part /= 2;
    t += 2 * l.alpha + part * (2 * l.beta + l.gamma);  // halving step and its doubling twin
  }
  if (pof2 != s.ranks) {
    const LinkCost& l = flat_link(s, m);
    t += 2 * (l.alpha + n * l.beta) + n * l.gamma;
  }
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  return allreduce_rabenseifner(input_of(a), a.rbuf, a.count, *r, h.comm(), Tag::allreduce);
}

}  // namespace

extern const Algorithm allreduce_rabenseifner_algorithm{.collective = Collective::allreduce,
                                                        .name = "rabenseifner",
                                                        .needs = {.order = OpOrder::rank_order},
                                                        .predicted_seconds = predicted,
                                                        .run = run};

}  // namespace veneer::algorithms
