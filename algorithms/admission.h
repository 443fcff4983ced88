// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Admission: whether Veneer may take a call at all, decided only from
// arguments MPI requires to be identical on every rank, and the Shape the
// selector sees (the call's part from its arguments, the communicator's part
// from its hierarchy).
#include <mpi.h>

#include <optional>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/collectives.h"
#include "algorithms/decisions.h"

namespace veneer::algorithms {

bool is_reduction(Collective c);

// The call's part of its Shape (collective, bytes, count, the op's and type's
// properties, in place) on a communicator of `p` ranks; nullopt, with
// `why`, when Veneer does not take such a call.
std::optional<Shape> admit(const Call& c, int p, std::string* why = nullptr);
// Adds the communicator's part (ranks, nodes, ranks per node, ...) from its hierarchy.
void place(Shape& s, const Hierarchy& h);

// Whether a decision about `c` may be remembered (decisions.h): its handles
// cannot change meaning unnoticed, reduce_scatter's counts array is not
// part of the key, and a broadcast's, allgather's or alltoall's bucket of
// counts holds one bucket of bytes (collectives.h agreed_call).
bool rememberable(const Call& c);
// Whether `c` is a reduction with a user-defined op and its other handles
// are as rememberable() asks: its decision may be remembered only where any
// user-defined op would get the same (algorithms/collectives.cpp), as the
// op's handle may be freed and made again for another op unseen.
bool user_op_call(const Call& c);
// For Reduce_scatter, whose shape depends on its counts only through their
// total (admit): whether a decision about `c` on comm may be remembered
// under `key` with the total as its count (every count valid, the total an
// int, the handles as rememberable() or user_op_call() asks); sets key.count.
bool key_scatter_total(const Call& c, MPI_Comm comm, DecisionKey& key);

}  // namespace veneer::algorithms
