// SPDX-License-Identifier: BSD-3-Clause
// Broadcast as van de Geijn: the root scatters p blocks along a binomial tree,
// then a ring allgather assembles them everywhere. About twice the message
// crosses each link instead of log2(p) times: for large messages.
#include <algorithm>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

int bcast_scatter_allgather(std::byte* buf, int64_t bytes, int root, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  if (p == 1 || bytes == 0) return MPI_SUCCESS;
  // Blocks are numbered relative to the root: relative rank v owns block v.
  const Blocks blocks = Blocks::even(bytes, p);
  const int me = (rank - root + p) % p;
  auto run_of = [&](int first, int last) {  // bytes of blocks [first, last), clipped to p
    last = std::min(last, p);
    return blocks.count(first, last);
  };
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (me & mask) {  // my subtree is [me, me + mask)
      VENEER_TRY(recv(buf + blocks.offsets[static_cast<size_t>(me)], run_of(me, me + mask), MPI_BYTE,
                      (me - mask + root) % p, tag, comm));
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    const int child = me + mask;
    if (child < p)
      VENEER_TRY(send(buf + blocks.offsets[static_cast<size_t>(child)], run_of(child, child + mask), MPI_BYTE,
                      (child + root) % p, tag, comm));
  }
  // The ring never writes into the root's buffer: it is the send buffer.
  const int right = me == p - 1 ? MPI_PROC_NULL : (rank + 1) % p;
  const int left = me == 0 ? MPI_PROC_NULL : (rank - 1 + p) % p;
  for (int step = 0; step < p - 1; ++step) {
    const size_t out = static_cast<size_t>((me - step + p) % p), in = static_cast<size_t>((me - step - 1 + p) % p);
    VENEER_TRY(sendrecv(buf + blocks.offsets[out], blocks.counts[out], MPI_BYTE, right, buf + blocks.offsets[in],
                        blocks.counts[in], MPI_BYTE, left, tag, comm));
  }
  return MPI_SUCCESS;
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost& l = flat_link(s, m);
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  return (ceil_log2(s.ranks) + p - 1) * l.alpha + 2 * (p - 1) / p * n * l.beta;
}

int run(const Args& a, const Hierarchy& h) {
  return bcast_scatter_allgather(static_cast<std::byte*>(a.rbuf), a.count, a.root, h.comm(), Tag::bcast);
}

}  // namespace

extern const Algorithm bcast_scatter_allgather_algorithm{.collective = Collective::bcast,
                                                         .name = "scatter_allgather",
                                                         .needs = {},
                                                         .predicted_seconds = predicted,
                                                         .run = run};

}  // namespace veneer::algorithms
