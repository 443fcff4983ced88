// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Where a point-to-point peer runs: on this rank's node or another one, for
// the send take-over rule (support/send_rule.h). MPI_COMM_WORLD's node map is
// learnt once at MPI_Init (one allgather, a second one under pretend nodes
// to count the real hosts); every other communicator's levels are translated from
// it once, without communication, and cached on the communicator (an
// attribute freed with it). Never asked on the pass-through fast path.
#include <mpi.h>

#include "support/send_rule.h"

namespace veneer::topology {

// Collective over MPI_COMM_WORLD: learns which node every world rank runs on
// (host names, or the pretend nodes of VENEER_RANKS_PER_NODE, as the
// hierarchy does), and keeps the real nodes' keys for the hierarchies built
// after it (build_world_hierarchy_keeping_keys). False (and every level
// unknown) on an MPI error, logged with its cause, its code in *rc
// (topology/mpi_error.h).
bool learn_world_nodes(int* rc = nullptr);
// Forgets the map (every level unknown again); for tests and MPI_Finalize.
void forget_world_nodes();
// How many hosts (machines with their own host name; pretend nodes do not
// count) MPI_COMM_WORLD runs on, as learnt by learn_world_nodes; 0 before.
int world_host_count();

// The level of `peer` (a rank of comm, of its remote group for an
// intercommunicator, or MPI_ANY_SOURCE: the level every possible sender
// shares, else unknown). Unknown before learn_world_nodes, for a peer outside
// MPI_COMM_WORLD, an invalid rank, or on an MPI error (logged with its
// cause). Thread-safe.
PeerLevel peer_level(MPI_Comm comm, int peer);

}  // namespace veneer::topology
