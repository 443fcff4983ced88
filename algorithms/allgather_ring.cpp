// SPDX-License-Identifier: BSD-3-Clause
// Allgather along a ring: p-1 steps, each passing one block to the right
// neighbour. Bandwidth optimal at any p, p-1 latencies: for large messages.
#include <cstring>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

int allgatherv_ring(void* buf, const Blocks& blocks, MPI_Datatype type, int64_t extent, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  const int right = (rank + 1) % p, left = (rank - 1 + p) % p;
  auto at = [&](size_t b) { return static_cast<std::byte*>(buf) + blocks.offsets[b] * extent; };
  for (int step = 0; step < p - 1; ++step) {
    const size_t out = static_cast<size_t>((rank - step + p) % p), in = static_cast<size_t>((rank - step - 1 + p) % p);
    VENEER_TRY(sendrecv(at(out), blocks.counts[out], type, right, at(in), blocks.counts[in], type, left, tag, comm));
  }
  return MPI_SUCCESS;
}

// Allgather algorithms start with this rank's block in place.
void place_own_block(const Args& a, int rank) {
  if (a.sbuf != MPI_IN_PLACE && a.count > 0)
    std::memcpy(static_cast<std::byte*>(a.rbuf) + static_cast<int64_t>(rank) * a.count, a.sbuf,
                static_cast<size_t>(a.count));
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost& l = flat_link(s, m);
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  return (p - 1) * l.alpha + (p - 1) / p * n * l.beta;
}

int run(const Args& a, const Hierarchy& h) {
  place_own_block(a, h.rank);
  return allgatherv_ring(a.rbuf, Blocks::uniform(a.count, h.size), MPI_BYTE, 1, h.comm(), Tag::allgather);
}

}  // namespace

extern const Algorithm allgather_ring_algorithm{
    .collective = Collective::allgather, .name = "ring", .needs = {}, .predicted_seconds = predicted, .run = run};

}  // namespace veneer::algorithms
