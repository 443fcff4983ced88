// SPDX-License-Identifier: BSD-3-Clause
// Allgather as Bruck et al.: ceil(log2(p)) steps at any p, each sending the
// blocks gathered so far to rank - 2^k, then one local rotation. Latency
// optimal for non-powers of two, for small messages.
#include <algorithm>
#include <cstring>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost l = crowded_link(s, m);  // every rank crosses at once
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  return ceil_log2(s.ranks) * l.alpha + (p - 1) / p * n * l.beta + n * m.intra.beta;  // + the rotation
}

int run(const Args& a, const Hierarchy& h) {
  const int p = h.size, rank = h.rank;
  const int64_t b = a.count;
  auto* out = static_cast<std::byte*>(a.rbuf);
  // gathered[i] is the block of rank (rank + i) % p.
  Scratch gathered(static_cast<size_t>(p * b));
  const void* own = a.sbuf == MPI_IN_PLACE ? out + rank * b : a.sbuf;
  if (b > 0) std::memcpy(gathered.data(), own, static_cast<size_t>(b));
  for (int have = 1; have < p; have <<= 1) {
    const int64_t blocks = std::min(have, p - have);
    VENEER_TRY(sendrecv(gathered.data(), blocks * b, MPI_BYTE, (rank - have + p) % p, gathered.data() + have * b,
                        blocks * b, MPI_BYTE, (rank + have) % p, Tag::allgather, h.comm()));
  }
  for (int i = 0; i < p && b > 0; ++i)
    std::memcpy(out + static_cast<int64_t>((rank + i) % p) * b, gathered.data() + i * b, static_cast<size_t>(b));
  return MPI_SUCCESS;
}

}  // namespace

extern const Algorithm allgather_bruck_algorithm{
    .collective = Collective::allgather, .name = "bruck", .needs = {}, .predicted_seconds = predicted, .run = run};

}  // namespace veneer::algorithms
