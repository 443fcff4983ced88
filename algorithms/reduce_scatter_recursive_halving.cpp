// SPDX-License-Identifier: BSD-3-Clause
// Reduce-scatter by recursive halving: log2(p) steps, each exchanging half of
// what remains. Nearest partners first keep rank order (see halving.h); the
// block a rank ends with then goes to its owner in one more exchange.
#include "algorithms/halving.h"

namespace veneer::algorithms {

int reduce_scatter_recursive_halving(const void* input, void* output, const Blocks& blocks, const Reduction& r,
                                     MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  const size_t me = static_cast<size_t>(rank);
  if (p == 1) return copy(output, element(input, blocks.offsets[me], r.type), blocks.counts[me], r.type);
  const int64_t n = blocks.offsets[static_cast<size_t>(p)];
  Folding f(p, rank);
  TempBuffer acc(n, r.type), scratch(n, r.type);
  VENEER_TRY(copy(acc.data(), input, n, r.type));
  VENEER_TRY(fold_in(f, acc.data(), scratch.data(), n, r, comm, tag));
  if (f.newrank < 0)  // folded out: the odd neighbour returns my block
    return recv(output, blocks.counts[me], r.type.handle, rank + 1, tag, comm);
  Window w;
  VENEER_TRY(halve(f, acc.data(), scratch.data(), blocks, r, comm, tag, w));
  auto offset = [&](int q) { return blocks.offsets[static_cast<size_t>(f.first_block(q))]; };
  const int q = f.newrank, held = w.lo;  // held == bit_reverse(q)
  if (held != q) {
    // newrank `held` holds my block (bit reversal is its own inverse): swap.
    const int partner = f.original(held);
    VENEER_TRY(sendrecv(element(acc.data(), offset(held), r.type), offset(held + 1) - offset(held), r.type.handle,
                        partner, element(acc.data(), offset(q), r.type), offset(q + 1) - offset(q), r.type.handle,
                        partner, tag, comm));
  }
  if (q < f.rem) {  // my newblock also holds the block of the folded-out rank below me
    const size_t below = me - 1;
    VENEER_TRY(send(element(acc.data(), blocks.offsets[below], r.type), blocks.counts[below], r.type.handle, rank - 1,
                    tag, comm));
  }
  return copy(output, element(acc.data(), blocks.offsets[me], r.type), blocks.counts[me], r.type);
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const int pof2 = floor_pow2(s.ranks);
  double t = 0, part = n;
  for (int d = 1; d < pof2; d <<= 1) {
    const LinkCost& l = link_at_distance(s, m, d);
    part /= 2;
    t += l.alpha + part * (l.beta + l.gamma);
  }
  const LinkCost& l = flat_link(s, m);
  t += l.alpha + n / s.ranks * l.beta;  // the swap into place
  if (pof2 != s.ranks) t += 2 * l.alpha + n * (l.beta + l.gamma);
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const Blocks blocks = a.rcounts ? Blocks::of_counts(a.rcounts, h.size) : Blocks::uniform(a.count, h.size);
  return reduce_scatter_recursive_halving(input_of(a), a.rbuf, blocks, *r, h.comm(), Tag::reduce_scatter);
}

}  // namespace

extern const Algorithm reduce_scatter_recursive_halving_algorithm{.collective = Collective::reduce_scatter,
                                                                  .name = "recursive_halving",
                                                                  .needs = {.order = OpOrder::rank_order},
                                                                  .predicted_seconds = predicted,
                                                                  .run = run};
extern const Algorithm reduce_scatter_block_recursive_halving_algorithm{.collective = Collective::reduce_scatter_block,
                                                                        .name = "recursive_halving",
                                                                        .needs = {.order = OpOrder::rank_order},
                                                                        .predicted_seconds = predicted,
                                                                        .run = run};

}  // namespace veneer::algorithms
