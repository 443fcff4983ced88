// SPDX-License-Identifier: BSD-3-Clause
// Reduce-scatter by pairwise exchange: in step s every rank sends the block
// of rank+s and receives its own block from rank-s. p-1 latencies, each block
// crosses once: for large messages and any p. Sources come in descending
// order below and then above this rank, so two accumulators, each extended
// on the left, keep rank order; the one combination at the end joins them.
#include <utility>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

int reduce_scatter_pairwise(const void* input, void* output, const Blocks& blocks, const Reduction& r, MPI_Comm comm,
                            Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  const size_t me = static_cast<size_t>(rank);
  const int64_t n = blocks.counts[me];
  const void* own = element(input, blocks.offsets[me], r.type);
  if (p == 1) return copy(output, own, n, r.type);
  TempBuffer a(n, r.type), b(n, r.type), c(n, r.type);
  void* below = a.data();  // ranks [src, rank]: a_src op ... op a_rank
  void* above = nullptr;   // ranks [src, p): set once the first higher rank arrives
  void* incoming = b.data();
  void* spare = c.data();
  VENEER_TRY(copy(below, own, n, r.type));
  for (int step = 1; step < p; ++step) {
    const int dest = (rank + step) % p, src = (rank - step + p) % p;
    const size_t d = static_cast<size_t>(dest);
    VENEER_TRY(sendrecv(element(input, blocks.offsets[d], r.type), blocks.counts[d], r.type.handle, dest, incoming, n,
                        r.type.handle, src, tag, comm));
    if (src < rank) {
      VENEER_TRY(reduce_local(incoming, below, n, r.type, r.op));
    } else if (!above) {
      above = incoming;
      incoming = spare;
    } else {
      VENEER_TRY(reduce_local(incoming, above, n, r.type, r.op));
    }
  }
  if (!above) return copy(output, below, n, r.type);
  VENEER_TRY(reduce_local(below, above, n, r.type, r.op));
  return copy(output, above, n, r.type);
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost l = crowded_link(s, m);  // every rank crosses at once
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  return (p - 1) * l.alpha + (p - 1) / p * n * (l.beta + l.gamma);
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  const Blocks blocks = a.rcounts ? Blocks::of_counts(a.rcounts, h.size) : Blocks::uniform(a.count, h.size);
  return reduce_scatter_pairwise(input_of(a), a.rbuf, blocks, *r, h.comm(), Tag::reduce_scatter);
}

}  // namespace

extern const Algorithm reduce_scatter_pairwise_algorithm{.collective = Collective::reduce_scatter,
                                                         .name = "pairwise",
                                                         .needs = {.order = OpOrder::rank_order},
                                                         .predicted_seconds = predicted,
                                                         .run = run};
extern const Algorithm reduce_scatter_block_pairwise_algorithm{.collective = Collective::reduce_scatter_block,
                                                               .name = "pairwise",
                                                               .needs = {.order = OpOrder::rank_order},
                                                               .predicted_seconds = predicted,
                                                               .run = run};

}  // namespace veneer::algorithms
