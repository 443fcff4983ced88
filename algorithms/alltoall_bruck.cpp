// SPDX-License-Identifier: BSD-3-Clause
// Alltoall as Bruck et al.: after a local rotation, ceil(log2(p)) steps, step
// k forwarding every block whose index has bit k set to rank + 2^k; a final
// rotation puts blocks in place. log2(p) latencies but each block travels
// up to log2(p) times: for small blocks and many ranks.
#include <cstring>

#include "algorithms/primitives.h"

namespace veneer::algorithms {
namespace {

double predicted(const Shape& s, const CostModel& m) {
  const LinkCost l = crowded_link(s, m);  // every rank crosses at once
  const double n = static_cast<double>(s.bytes);
  return ceil_log2(s.ranks) * (l.alpha + n / 2 * (l.beta + 2 * m.intra.beta)) + 2 * n * m.intra.beta;
}

int run(const Args& a, const Hierarchy& h) {
  const int p = h.size, rank = h.rank;
  const int64_t b = a.count;
  auto* out = static_cast<std::byte*>(a.rbuf);
  const std::byte* in = a.sbuf == MPI_IN_PLACE ? out : static_cast<const std::byte*>(a.sbuf);
  // rotated[i] is, until the end, the block that travels i ranks onward.
  Scratch rotated(static_cast<size_t>(p * b));
  for (int i = 0; i < p && b > 0; ++i)
    std::memcpy(rotated.data() + i * b, in + static_cast<int64_t>((rank + i) % p) * b, static_cast<size_t>(b));
  Scratch outgoing(static_cast<size_t>((p / 2 + 1) * b)), incoming(outgoing.size());
  for (int bit = 1; bit < p; bit <<= 1) {
    int64_t packed = 0;
    for (int i = bit; i < p; ++i)
      if (i & bit) std::memcpy(outgoing.data() + (packed++) * b, rotated.data() + i * b, static_cast<size_t>(b));
    VENEER_TRY(sendrecv(outgoing.data(), packed * b, MPI_BYTE, (rank + bit) % p, incoming.data(), packed * b, MPI_BYTE,
                        (rank - bit + p) % p, Tag::alltoall, h.comm()));
    packed = 0;
    for (int i = bit; i < p; ++i)
      if (i & bit) std::memcpy(rotated.data() + i * b, incoming.data() + (packed++) * b, static_cast<size_t>(b));
  }
  // rotated[i] came from rank - i.
  for (int i = 0; i < p && b > 0; ++i)
    std::memcpy(out + static_cast<int64_t>((rank - i + p) % p) * b, rotated.data() + i * b, static_cast<size_t>(b));
  return MPI_SUCCESS;
}

}  // namespace

extern const Algorithm alltoall_bruck_algorithm{
    .collective = Collective::alltoall, .name = "bruck", .needs = {}, .predicted_seconds = predicted, .run = run};

}  // namespace veneer::algorithms
