// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Building blocks shared by the algorithms, each over one explicit
// communicator (the hierarchy's flat, node, leader or lane communicator).
// `input` is never MPI_IN_PLACE here: callers resolve it; input == output
// means in place. Reductions take operands in rank order unless noted, so
// they hold for non-commutative ops.
#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include <optional>

#include "algorithms/algorithm.h"
#include "algorithms/buffers.h"
#include "algorithms/p2p.h"

namespace veneer::algorithms {

struct Reduction {
  ElementType type;
  MPI_Op op = MPI_OP_NULL;
  bool commutative = true;
};

// The reduction of a call (type, op); nullopt for a type the algorithms do not take.
std::optional<Reduction> reduction_of(const Args& a);
// Where a call's input is: rbuf for MPI_IN_PLACE.
inline const void* input_of(const Args& a) { return a.sbuf == MPI_IN_PLACE ? a.rbuf : a.sbuf; }

// Allreduce over every rank of comm; output on all.
int allreduce_recursive_doubling(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm,
                                 Tag tag);
int allreduce_rabenseifner(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag);
int allreduce_ring(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm,
                   Tag tag);  // any order

// The allreduce among node leaders or along a lane: recursive doubling, or
// Rabenseifner for large vectors. inter_node_uses_halving decides, from
// arguments every member shares; the formula predicts the time of that choice.
bool inter_node_uses_halving(int64_t bytes, int64_t count, int ranks);
double inter_node_allreduce_seconds(double bytes, int64_t count, int ranks, const LinkCost& l);
int inter_node_allreduce(void* buf, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag);

// Reduce to rank 0 in rank order along a binomial tree; output significant (and non-null) at rank 0 only.
int reduce_binomial_to_zero(const void* input, void* output, int64_t count, const Reduction& r, MPI_Comm comm, Tag tag);
// Reduce to `root`: for commutative ops a binomial tree rooted there, else to rank 0 and on to root.
int reduce_binomial(const void* input, void* output, int64_t count, const Reduction& r, int root, MPI_Comm comm,
                    Tag tag);

// Broadcast of count elements of `type` from root along a binomial tree.
int bcast_binomial(void* buf, int64_t count, MPI_Datatype type, int root, MPI_Comm comm, Tag tag);
// Broadcast of bytes: binomial scatter of p blocks, then a ring allgather (van de Geijn).
int bcast_scatter_allgather(std::byte* buf, int64_t bytes, int root, MPI_Comm comm, Tag tag);

// Reduce-scatter: rank i of comm ends with block i (blocks over the input) in output.
int reduce_scatter_pairwise(const void* input, void* output, const Blocks& blocks, const Reduction& r, MPI_Comm comm,
                            Tag tag);
int reduce_scatter_recursive_halving(const void* input, void* output, const Blocks& blocks, const Reduction& r,
                                     MPI_Comm comm, Tag tag);

// Allgatherv in place along a ring: rank i's block (blocks.counts[i] elements of
// `type` at element offset blocks.offsets[i]) is already in buf.
int allgatherv_ring(void* buf, const Blocks& blocks, MPI_Datatype type, int64_t extent, MPI_Comm comm, Tag tag);

// Allgather (bytes): copies this rank's block from sbuf to its place in rbuf unless in place.
void place_own_block(const Args& a, int rank);

// Gathers count elements from every rank of comm to rank 0 (linear), in rank order, into buf (rank 0 only).
int gather_linear(const void* input, void* buf, int64_t count, MPI_Datatype type, int64_t extent, MPI_Comm comm,
                  Tag tag);

}  // namespace veneer::algorithms
