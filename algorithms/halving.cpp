// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/halving.h"

#include <algorithm>

namespace veneer::algorithms {

Folding::Folding(int size, int my_rank) : p(size), rank(my_rank) {
  pof2 = 1;
  while (pof2 * 2 <= p) pof2 *= 2;
  rem = p - pof2;
  if (rank < 2 * rem) newrank = rank % 2 ? rank / 2 : -1;
  else newrank = rank - rem;
}

int bit_reverse(int value, int bits) {
  int out = 0;
  for (int i = 0; i < bits; ++i) out |= ((value >> i) & 1) << (bits - 1 - i);
  return out;
}

namespace {
int64_t window_offset(const Folding& f, const Blocks& b, int lo) {
  return b.offsets[static_cast<size_t>(f.first_block(lo))];
}
int64_t window_count(const Folding& f, const Blocks& b, int lo, int hi) {
  return window_offset(f, b, hi) - window_offset(f, b, lo);
}
}  // namespace

int fold_in(const Folding& f, void* acc, void* tmp, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag) {
  if (f.rank >= 2 * f.rem) return MPI_SUCCESS;
  if (f.rank % 2 == 0) return send(acc, count, r.type.handle, f.rank + 1, tag, comm);
  VENEER_TRY(recv(tmp, count, r.type.handle, f.rank - 1, tag, comm));
  return reduce_local(tmp, acc, count, r.type, r.op);  // even (lower) op odd
}

int fold_out(const Folding& f, void* acc, int64_t count, const ElementType& t, MPI_Comm comm, Tag tag) {
  if (f.rank >= 2 * f.rem) return MPI_SUCCESS;
  if (f.rank % 2) return send(acc, count, t.handle, f.rank - 1, tag, comm);
  return recv(acc, count, t.handle, f.rank + 1, tag, comm);
}

int halve(const Folding& f, void* acc, void* tmp, const Blocks& blocks, const Reduction& r, MPI_Comm comm, Tag tag,
          Window& window) {
  const int q = f.newrank;
  window = Window{0, f.pof2};
  for (int mask = 1; mask < f.pof2; mask <<= 1) {
    const int partner = f.original(q ^ mask);
    const int mid = (window.lo + window.hi) / 2;
    const bool upper = q & mask;
    Window keep = upper ? Window{mid, window.hi} : Window{window.lo, mid};
    Window give = upper ? Window{window.lo, mid} : Window{mid, window.hi};
    int64_t keep_count = window_count(f, blocks, keep.lo, keep.hi);
    void* mine = element(acc, window_offset(f, blocks, keep.lo), r.type);
    VENEER_TRY(sendrecv(element(acc, window_offset(f, blocks, give.lo), r.type),
                        window_count(f, blocks, give.lo, give.hi), r.type.handle, partner, tmp, keep_count,
                        r.type.handle, partner, tag, comm));
    if (upper) {
      VENEER_TRY(reduce_local(tmp, mine, keep_count, r.type, r.op));  // partner's run is the lower one
    } else {
      VENEER_TRY(reduce_local(mine, tmp, keep_count, r.type, r.op));
      VENEER_TRY(copy(mine, tmp, keep_count, r.type));
    }
    window = keep;
  }
  return MPI_SUCCESS;
}

int double_back(const Folding& f, void* acc, const Blocks& blocks, const ElementType& t, MPI_Comm comm, Tag tag,
                Window& window) {
  const int q = f.newrank;
  for (int mask = f.pof2 / 2; mask >= 1; mask >>= 1) {
    const int partner = f.original(q ^ mask);
    const int size = window.hi - window.lo;
    Window sibling = (q & mask) ? Window{window.lo - size, window.lo} : Window{window.hi, window.hi + size};
    VENEER_TRY(sendrecv(element(acc, window_offset(f, blocks, window.lo), t),
                        window_count(f, blocks, window.lo, window.hi), t.handle, partner,
                        element(acc, window_offset(f, blocks, sibling.lo), t),
                        window_count(f, blocks, sibling.lo, sibling.hi), t.handle, partner, tag, comm));
    window = Window{std::min(window.lo, sibling.lo), std::max(window.hi, sibling.hi)};
  }
  return MPI_SUCCESS;
}

int gather_to_first(const Folding& f, void* acc, const Blocks& blocks, const ElementType& t, MPI_Comm comm, Tag tag,
                    Window& window) {
  const int q = f.newrank;
  for (int mask = f.pof2 / 2; mask >= 1; mask >>= 1) {
    const int partner = f.original(q ^ mask);
    if (q & mask)
      return send(element(acc, window_offset(f, blocks, window.lo), t), window_count(f, blocks, window.lo, window.hi),
                  t.handle, partner, tag, comm);
    const int size = window.hi - window.lo;
    Window sibling{window.hi, window.hi + size};
    VENEER_TRY(recv(element(acc, window_offset(f, blocks, sibling.lo), t),
                    window_count(f, blocks, sibling.lo, sibling.hi), t.handle, partner, tag, comm));
    window.hi = sibling.hi;
  }
  return MPI_SUCCESS;
}

}  // namespace veneer::algorithms
