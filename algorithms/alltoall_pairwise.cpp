// SPDX-License-Identifier: BSD-3-Clause
// Alltoall by pairwise exchange: in step s, send to rank+s and receive from
// rank-s. p-1 latencies, each block sent once: for large blocks.
#include <cstring>

#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost l = crowded_link(s, m);  // every rank crosses at once
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  return (p - 1) * l.alpha + (p - 1) / p * n * l.beta;
}

int run(const Args& a, const Hierarchy& h) {
  const int p = h.size, rank = h.rank;
  const int64_t b = a.count;
  auto* out = static_cast<std::byte*>(a.rbuf);
  Scratch saved;
  const std::byte* in = static_cast<const std::byte*>(a.sbuf);
  if (a.sbuf == MPI_IN_PLACE) {
    saved.reset(static_cast<size_t>(p * b));
    if (b > 0) std::memcpy(saved.data(), out, static_cast<size_t>(p * b));
    in = saved.data();
  }
  if (b > 0) std::memcpy(out + rank * b, in + rank * b, static_cast<size_t>(b));
  for (int step = 1; step < p; ++step) {
    const int64_t dest = (rank + step) % p, src = (rank - step + p) % p;
    VENEER_TRY(sendrecv(in + dest * b, b, MPI_BYTE, static_cast<int>(dest), out + src * b, b, MPI_BYTE,
                        static_cast<int>(src), Tag::alltoall, h.comm()));
  }
  return MPI_SUCCESS;
}

}  // namespace

extern const Algorithm alltoall_pairwise_algorithm{
    .collective = Collective::alltoall, .name = "pairwise", .needs = {}, .predicted_seconds = predicted, .run = run};

}  // namespace veneer::algorithms
