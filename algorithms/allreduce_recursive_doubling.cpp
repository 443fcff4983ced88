// SPDX-License-Identifier: BSD-3-Clause
// Allreduce by recursive doubling: log2(p) exchanges of the whole vector,
// ranks beyond a power of two folded in pairs. Latency-optimal, for small
// messages. Both partners compute lower-run op upper-run on the same operands,
// so every rank ends with the same bits.
#include <utility>

#include "algorithms/halving.h"

namespace veneer::algorithms {

namespace {

// The power-of-two ranks' exchanges: `output` holds this rank's (folded-in)
// vector and ends with the whole result; `scratch` is a second buffer of it.
int exchange_doubling(const Folding& f, int rank, void* output, void* scratch, int64_t count, const Reduction& r,
                      MPI_Comm comm, Tag tag) {
  void* acc = output;
  void* other = scratch;
  for (int mask = 1; mask < f.pof2; mask <<= 1) {
    const int partner = f.original(f.newrank ^ mask);
    VENEER_TRY(sendrecv(acc, count, r.type.handle, partner, other, count, r.type.handle, partner, tag, comm));
    if (partner < rank) {
      VENEER_TRY(reduce_local(other, acc, count, r.type, r.op));
    } else {
      VENEER_TRY(reduce_local(acc, other, count, r.type, r.op));
      std::swap(acc, other);  // the result (mine op partner's) is in the other buffer now
    }
  }
  return acc != output ? copy(output, acc, count, r.type) : MPI_SUCCESS;
}

}  // namespace

int allreduce_recursive_doubling(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm,
                                 Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  VENEER_TRY(copy(output, input, count, r.type));
  if (p == 1 || count == 0) return MPI_SUCCESS;
  Folding f(p, rank);
  TempBuffer scratch(count, r.type);
  VENEER_TRY(fold_in(f, output, scratch.data(), count, r, comm, tag));
  if (f.newrank >= 0) VENEER_TRY(exchange_doubling(f, rank, output, scratch.data(), count, r, comm, tag));
  return fold_out(f, output, count, r.type, comm, tag);
}

namespace {

double predicted(const Shape& s, const CostModel& m) {
  const double n = static_cast<double>(s.bytes);
  const int pof2 = floor_pow2(s.ranks);
  double t = 0;
  for (int d = 1; d < pof2; d <<= 1) {
    const LinkCost& l = link_at_distance(s, m, d);
    t += l.alpha + n * (l.beta + l.gamma);
  }
  if (pof2 != s.ranks) {
    const LinkCost& l = flat_link(s, m);
    t += 2 * (l.alpha + n * l.beta) + n * l.gamma;
  }
  return t;
}

int run(const Args& a, const Hierarchy& h) {
  auto r = reduction_of(a);
  if (!r) return MPI_ERR_TYPE;
  return allreduce_recursive_doubling(input_of(a), a.rbuf, a.count, *r, h.comm(), Tag::allreduce);
}

}  // namespace

extern const Algorithm allreduce_recursive_doubling_algorithm{.collective = Collective::allreduce,
                                                              .name = "recursive_doubling",
                                                              .needs = {.order = OpOrder::rank_order},
                                                              .predicted_seconds = predicted,
                                                              .run = run};

}  // namespace veneer::algorithms
