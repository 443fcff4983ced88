// SPDX-License-Identifier: BSD-3-Clause
// Allgather by recursive doubling: log2(p) exchanges, each doubling the run
// of blocks a rank holds. Latency optimal; needs a power-of-two size.
#include "algorithms/primitives.h"

namespace veneer::algorithms {

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes), p = s.ranks;
  double t = 0, run_bytes = n / p;
  for (int d = 1; d < s.ranks; d <<= 1, run_bytes *= 2) {
    const LinkCost& l = link_at_distance(s, m, d);
    t += l.alpha + run_bytes * l.beta;
  }
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  place_own_block(a, h.rank);
  auto* buf = static_cast<std::byte*>(a.rbuf);
  const int64_t b = a.count;
  for (int mask = 1; mask < h.size; mask <<= 1) {
    const int partner = h.rank ^ mask;
    const int64_t mine = h.rank & ~(mask - 1), theirs = partner & ~(mask - 1);
    VENEER_TRY(sendrecv(buf + mine * b, mask * b, MPI_BYTE, partner, buf + theirs * b, mask * b, MPI_BYTE, partner,
                        Tag::allgather, h.comm()));
  }
  return MPI_SUCCESS;
}

}  // namespace

extern const Algorithm allgather_recursive_doubling_algorithm{.collective = Collective::allgather,
                                                              .name = "recursive_doubling",
                                                              .needs = {.power_of_two = true},
                                                              .predicted_seconds = predicted,
                                                              .run = run};

}  // namespace veneer::algorithms
