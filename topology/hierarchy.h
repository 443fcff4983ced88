// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The node structure of one communicator, as the hierarchical collectives
// need it: which ranks share a node, and Veneer's private communicators over
// those ranks (a duplicate, one per node, one among the node leaders, one per
// "lane": the ranks with the same local index on every node). Cached on the
// communicator with an attribute, whose delete callback frees it with the
// communicator.
//
// Two steps, so that deciding creates no communicator:
// - the layout (who is on which node) is learnt with one allgather on the
//   user's communicator, inside a collective call every rank makes: it adds a
//   collective to that communicator, never a communicator to the job;
// - the private communicators are made only when an algorithm that runs on
//   them is chosen, each on first use, inside that same collective call, so a
//   job whose collectives all go to the library keeps the library's own
//   sequence of communicators (context ids) untouched.
//
// Every communicator in here is private to Veneer (duplicates and splits), so
// the point-to-point messages of an algorithm can never match a receive the
// application posted on its own communicator.
//
// Errors (topology/mpi_error.h): every library call is checked; a failure is
// logged with its cause, and its MPI error code comes back in `*rc` beside a
// null result (nullptr, MPI_COMM_NULL) where the caller passes `rc`.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/mpi_error.h"

namespace veneer::topology {

struct Hierarchy {
  MPI_Comm parent = MPI_COMM_NULL;  // the user's communicator this describes (not owned)
  int rank = 0;
  int size = 0;

  int node_rank = 0;  // my index on my node (my lane)
  int node_size = 0;

  int node_count = 0;  // nodes are numbered by their lowest rank
  int node_index = 0;  // my node

  std::vector<int> node_of_rank;             // rank -> node index
  std::vector<int> local_rank_of;            // rank -> index on its node
  std::vector<std::vector<int>> node_ranks;  // node index -> its ranks, ascending

  bool node_consecutive = true;      // every node is a run of consecutive ranks
  bool equal_ranks_per_node = true;  // every node has the same number of ranks
  int min_ranks_per_node = 0;
  int max_ranks_per_node = 0;
  bool pretend = false;  // nodes given by VENEER_RANKS_PER_NODE or a test, not the hardware
  // Some real node runs more ranks than it has hardware threads; agreed by all
  // ranks, so that choices depending on it are the same everywhere.
  bool oversubscribed = false;
  // The root of the previous broadcast [0] and reduce [1] on `parent` whose
  // choice depends on whether the root moved (algorithms/decisions.h).
  // Collective calls on a communicator come in one order on every rank, so
  // every rank reads the same history; relaxed, as MPI leaves concurrent
  // collectives on one communicator to the application to order.
  mutable std::atomic<int> last_root[2] = {0, 0};
  // MPI_Barrier calls on `parent` noted since Veneer began to note them
  // (algorithms::note_barrier), and per collective (indexed by
  // algorithms::Collective) the count at its previous call whose choice
  // depends on whether a barrier came between (algorithms/decisions.h).
  // The same order argument holds.
  mutable std::atomic<uint64_t> barriers{0};
  // Whether barriers on `parent` are counted in `barriers`: from the first
  // decision about a call on `parent` that depends on them, made at the
  // same call on every one of its ranks. (A rank that made such a decision
  // about another communicator first, one the others are not in, would
  // otherwise count barriers here that they do not, and take the next call
  // for the first since a barrier where they do not.)
  mutable std::atomic<bool> barriers_counted{false};
  mutable std::atomic<uint64_t> barriers_seen[8] = {};
  // The collectives' trials of their choices on `parent` (algorithms/trial.h),
  // made on first use; freed with the hierarchy, so with the communicator.
  mutable std::shared_ptr<void> trials;

  Hierarchy() = default;
  Hierarchy(const Hierarchy&) = delete;
  Hierarchy& operator=(const Hierarchy&) = delete;
  ~Hierarchy();  // frees the communicators made (needs MPI still initialised)

  int node_size_of(int node) const { return static_cast<int>(node_ranks[static_cast<size_t>(node)].size()); }
  // "8 ranks on 3 nodes (3,2,3), node-consecutive"
  std::string describe() const;

  // Veneer's private communicators, each made on first use, so only the
  // algorithms that need one cost the job a communicator (and a context id).
  // Making one is collective over `parent`: every rank calls it, leader or
  // not, at the same point of the same collective call (algorithms declare
  // what they use; collectives.cpp makes it before they run).
  // MPI_COMM_NULL where the library failed to make it; *rc (when given) is
  // the code of the call that made it (or failed to), on every call.
  MPI_Comm comm(int* rc = nullptr) const {  // duplicate of parent: same ranks
    return comm_made_ ? (report_to(rc, comm_rc_), comm_) : make_comm(rc);
  }
  MPI_Comm node_comm(int* rc = nullptr) const {  // my node, in rank order
    return node_comm_made_ ? (report_to(rc, node_comm_rc_), node_comm_) : make_node_comm(rc);
  }
  // The node leaders (node_rank 0 of every node, in node order; MPI_COMM_NULL
  // with *rc MPI_SUCCESS on other ranks) and my lane (the ranks with my
  // node_rank, one per node that has one, in node order).
  MPI_Comm leaders(int* rc = nullptr) const;
  MPI_Comm lanes(int* rc = nullptr) const;
  // How many of the four exist now (0 until an algorithm or a test asks for one).
  int communicators_made() const;

 private:
  MPI_Comm make_comm(int* rc) const;
  MPI_Comm make_node_comm(int* rc) const;
  mutable MPI_Comm comm_ = MPI_COMM_NULL;
  mutable MPI_Comm node_comm_ = MPI_COMM_NULL;
  mutable MPI_Comm leader_comm_ = MPI_COMM_NULL;
  mutable MPI_Comm lane_comm_ = MPI_COMM_NULL;
  mutable bool comm_made_ = false;
  mutable bool node_comm_made_ = false;
  mutable bool leaders_made_ = false;
  mutable bool lanes_made_ = false;
  mutable int comm_rc_ = MPI_SUCCESS;
  mutable int node_comm_rc_ = MPI_SUCCESS;
  mutable int leaders_rc_ = MPI_SUCCESS;
  mutable int lanes_rc_ = MPI_SUCCESS;
};

// Learns the layout of `comm` (collective over comm: one allgather on it,
// or none where MPI_COMM_WORLD's node keys were kept and comm's ranks are
// all MPI_COMM_WORLD's; no communicator is made). `node_key`: this rank's node, as any non-negative
// integer shared by the ranks of one node; nullopt means the pretend nodes of
// VENEER_RANKS_PER_NODE, or else the real ones (the ranks with the same host
// name). Returns nullptr on an intercommunicator or MPI_COMM_NULL (*rc
// MPI_ERR_COMM) or when a library call fails (*rc its code). comm must outlive
// the result.
std::unique_ptr<Hierarchy> build_hierarchy(MPI_Comm comm, std::optional<int> node_key = std::nullopt,
                                           int* rc = nullptr);

// The MPI_COMM_WORLD rank of each rank of `group` (MPI_UNDEFINED for one
// that is not: spawned or connected processes); nullopt where the library
// could not say (logged).
std::optional<std::vector<int>> world_ranks_of(MPI_Group group);

// build_hierarchy(MPI_COMM_WORLD) with the real nodes, keeping every rank's
// node key, so that the communicators built after it learn their nodes from
// those (when all their ranks are MPI_COMM_WORLD's) instead of with an
// allgather. Only where every rank calls it before any collective call of
// the program's: at MPI_Init (topology::learn_world_nodes).
std::unique_ptr<Hierarchy> build_world_hierarchy_keeping_keys(int* rc = nullptr);

// The cached hierarchy of `comm`, built on first call (then collective over comm).
// Valid until comm is freed. nullptr where build_hierarchy would return it, or
// where caching it fails (*rc as there).
const Hierarchy* hierarchy(MPI_Comm comm, int* rc = nullptr);

// hierarchy(comm), once comm was seen `passes` times: before that, nothing
// is built, the sighting is counted on comm and *passed set (not
// collective). Every rank of comm asks at the same calls (the collective
// calls on comm that Veneer would decide), so all pass the same calls.
const Hierarchy* hierarchy_after_sightings(MPI_Comm comm, int passes, bool* passed);
// Counts a sighting of comm, as hierarchy_after_sightings does, where
// nothing was built for it yet (not collective): for a call that would have
// been decided and went to the library before that on this rank (device
// memory it does not stage), while the other ranks of the call counted it.
void count_sighting(MPI_Comm comm);

// The cached hierarchy of `comm`, or nullptr where none was built yet (never builds; not collective).
const Hierarchy* cached_hierarchy(MPI_Comm comm);

// Drops the cached hierarchy of comm, if any (frees its communicators). The
// library's error code of looking it up or deleting it.
int forget_hierarchy(MPI_Comm comm);

// Hierarchies alive right now (cached or not), for tests of the cache's cleanup.
int live_hierarchies();
// Communicators Veneer has made so far in this process (every duplicate and
// split, freed or not), for tests that the library's sequence is untouched.
int64_t communicators_created();

// This machine as a node key: a 64-bit hash of its host name (the launchers
// of Open MPI and MPICH tell nodes apart by name; ranks of one host share memory).
int64_t host_key();

// Node sizes given as "k" or "3,2,3" (the list repeats over the ranks); nullopt on junk.
std::optional<std::vector<int>> parse_node_sizes(std::string_view text);
// Node of the rank at `index` when nodes have `sizes` (repeating).
int node_of_index(int index, const std::vector<int>& sizes);
// The pretend node sizes of VENEER_RANKS_PER_NODE, read at each call; nullopt if unset or junk.
std::optional<std::vector<int>> pretend_node_sizes_from_env();
// VENEER_RANKS_PER_SOCKET=k: pretend sockets of k ranks within every node (a
// rank's socket is its index on its node divided by k), for rank placement
// where the hardware has one socket; read at each call; nullopt if unset or junk.
std::optional<int> pretend_socket_size_from_env();

}  // namespace veneer::topology
