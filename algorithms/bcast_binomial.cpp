// SPDX-License-Identifier: BSD-3-Clause
// Broadcast along a binomial tree: log2(p) steps of the whole message. The
// latency-optimal choice for small messages.
#include "algorithms/primitives.h"

namespace veneer::algorithms {

int bcast_binomial(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm, Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  if (p == 1 || count == 0) return MPI_SUCCESS;
  const int me = (rank - root + p) % p;
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (me & mask) {
      VENEER_TRY(recv(buf, count, type, (me - mask + root) % p, tag, comm));
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (me + mask < p) VENEER_TRY(send(buf, count, type, (me + mask + root) % p, tag, comm));
  return MPI_SUCCESS;
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost& l = flat_link(s, m);
  return ceil_log2(s.ranks) * (l.alpha + static_cast<double>(s.bytes) * l.beta);
}

int run(const Args& a, const Hierarchy& h) {
  return bcast_binomial(a.rbuf, a.count, MPI_BYTE, a.root, h.comm(), Tag::bcast);
}

}  // namespace

extern const Algorithm bcast_binomial_algorithm{
    .collective = Collective::bcast, .name = "binomial", .needs = {}, .predicted_seconds = predicted, .run = run};

}  // namespace veneer::algorithms
