// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Recursive halving / doubling on a power-of-two set of ranks, with the
// others folded in pairs first (ranks 2i and 2i+1 for i < p - 2^k), as in
// Rabenseifner's algorithms. Partners are paired nearest first (distance
// 1, 2, 4, ...), so every partial result covers a run of consecutive ranks
// and combining lower run op upper run keeps rank order: non-commutative
// ops are fine. The price: after halving, rank q holds the block numbered
// bit-reverse(q), which the doubling phase (or one extra exchange) sorts out.
#include <mpi.h>

#include <cstdint>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

struct Folding {
  int p = 1;
  int rank = 0;
  int pof2 = 1;
  int rem = 0;
  int newrank = 0;  // -1 for ranks folded out (even ranks below 2*rem)

  Folding(int size, int my_rank);
  // The rank that plays newrank q.
  int original(int q) const { return q < rem ? 2 * q + 1 : q + rem; }
  // The first of the p original blocks that newrank q's block covers (q in [0, pof2]).
  int first_block(int q) const { return q < rem ? 2 * q : q + rem; }
};

// Window of newblocks [lo, hi) a rank holds.
struct Window {
  int lo = 0;
  int hi = 0;
};

// Even ranks below 2*rem send their whole vector to the odd neighbour, which
// combines (even op odd). acc: the full vector (in and out); tmp: as large.
int fold_in(const Folding& f, void* acc, void* tmp, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag);
// The odd neighbour returns the full result to the even rank.
int fold_out(const Folding& f, void* acc, int64_t count, const ElementType& t, MPI_Comm comm, Tag tag);

// Recursive halving among active ranks: on return acc holds, reduced over all
// ranks, newblock window bit-reverse(newrank) (returned). tmp: half the vector at least.
int halve(const Folding& f, void* acc, void* tmp, const Blocks& blocks, const Reduction& r, MPI_Comm comm, Tag tag,
          Window& window);
// Recursive doubling back: every active rank ends with the whole vector in acc.
int double_back(const Folding& f, void* acc, const Blocks& blocks, const ElementType& t, MPI_Comm comm, Tag tag,
                Window& window);
// Binomial gather of the windows to newrank 0, which ends with the whole vector in acc.
int gather_to_first(const Folding& f, void* acc, const Blocks& blocks, const ElementType& t, MPI_Comm comm, Tag tag,
                    Window& window);

int bit_reverse(int value, int bits);

}  // namespace veneer::algorithms
