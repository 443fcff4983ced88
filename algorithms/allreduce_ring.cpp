// SPDX-License-Identifier: BSD-3-Clause
// Allreduce along a ring: p-1 steps of reduce-scatter, p-1 steps of
// allgather, each moving 1/p of the vector to the right neighbour. Bandwidth
// optimal at any p, but 2(p-1) latencies. Block j is combined starting at rank
// j and going round, so the op must be commutative; each block is reduced
// once, so all ranks still hold the same bits.
#include "algorithms/primitives.h"

namespace veneer::algorithms {

int allreduce_ring(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  VENEER_TRY(copy(output, input, count, r.type));
  if (p == 1 || count == 0) return MPI_SUCCESS;
  const Blocks blocks = Blocks::even(count, p);
  TempBuffer scratch(blocks.counts[0], r.type);  // block 0 is a largest one
  const int right = (rank + 1) % p, left = (rank - 1 + p) % p;
  auto block = [&](int b) { return element(output, blocks.offsets[static_cast<size_t>(b)], r.type); };
  auto size = [&](int b) { return blocks.counts[static_cast<size_t>(b)]; };
  for (int step = 0; step < p - 1; ++step) {
    const int out = (rank - step + p) % p, in = (rank - step - 1 + p) % p;
    VENEER_TRY(sendrecv(block(out), size(out), r.type.handle, right, scratch.data(), size(in), r.type.handle, left, tag,
                        comm));
    VENEER_TRY(reduce_local(scratch.data(), block(in), size(in), r.type, r.op));
  }
  // Rank r now holds block r+1 complete; pass the complete blocks round.
  for (int step = 0; step < p - 1; ++step) {
    const int out = (rank + 1 - step + p) % p, in = (rank - step + p) % p;
    VENEER_TRY(
        sendrecv(block(out), size(out), r.type.handle, right, block(in), size(in), r.type.handle, left, tag, comm));
  }
  return MPI_SUCCESS;
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  const LinkCost& l = flat_link(s, m);
  return 2 * (p - 1) * l.alpha + (p - 1) / p * n * (2 * l.beta + l.gamma);
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  return allreduce_ring(input_of(a), a.rbuf, a.count, *r, h.comm(), Tag::allreduce);
}

}  // namespace

extern const Algorithm allreduce_ring_algorithm{.collective = Collective::allreduce,
                                                .name = "ring",
                                                .needs = {.order = OpOrder::any_order},
                                                .predicted_seconds = predicted,
                                                .run = run};

}  // namespace veneer::algorithms
