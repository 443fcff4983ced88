#pragma once
// The node structure of one communicator, as the hierarchical collectives
// need it: which ranks share a node, one communicator per node, one among the
// node leaders, and one per "lane" (the ranks with the same local index on
// every node). Built collectively on first use and cached on the communicator
// with an attribute, whose delete callback frees it with the communicator.
//
// Every communicator in here is private to Veneer (duplicates and splits), so
// the point-to-point messages of an algorithm can never match a receive the
// application posted on its own communicator.
#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace veneer::topology {

struct Hierarchy {
  MPI_Comm comm = MPI_COMM_NULL;         // duplicate of the user's communicator, same ranks
  int rank = 0;
  int size = 0;

  MPI_Comm node_comm = MPI_COMM_NULL;    // ranks on my node, in rank order
  int node_rank = 0;                     // my index on my node (my lane)
  int node_size = 0;

  int node_count = 0;                    // nodes are numbered by their lowest rank
  int node_index = 0;                    // my node

  std::vector<int> node_of_rank;         // rank -> node index
  std::vector<int> local_rank_of;        // rank -> index on its node
  std::vector<std::vector<int>> node_ranks;  // node index -> its ranks, ascending

  bool node_consecutive = true;          // every node is a run of consecutive ranks
  bool equal_ranks_per_node = true;      // every node has the same number of ranks
  int min_ranks_per_node = 0;
  int max_ranks_per_node = 0;
  bool pretend = false;                  // nodes given by VENEER_RANKS_PER_NODE or a test, not the hardware
  // Some real node runs more ranks than it has hardware threads; agreed by all
  // ranks, so that choices depending on it are the same everywhere.
  bool oversubscribed = false;

  Hierarchy() = default;
  Hierarchy(const Hierarchy&) = delete;
  Hierarchy& operator=(const Hierarchy&) = delete;
  ~Hierarchy();  // frees the communicators (needs MPI still initialised)

  int node_size_of(int node) const { return static_cast<int>(node_ranks[static_cast<size_t>(node)].size()); }
  // "8 ranks on 3 nodes (3,2,3), node-consecutive"
  std::string describe() const;

  // The node leaders (node_rank 0 of every node, in node order; MPI_COMM_NULL
  // on other ranks) and my lane (the ranks with my node_rank, one per node
  // that has one, in node order). Made on first use, so communicators only
  // algorithms that need them cost context ids: collective over `comm`, so
  // every rank calls it, leader or not, in the same collective call.
  MPI_Comm leaders() const;
  MPI_Comm lanes() const;

 private:
  mutable MPI_Comm leader_comm_ = MPI_COMM_NULL;
  mutable MPI_Comm lane_comm_ = MPI_COMM_NULL;
  mutable bool leaders_made_ = false;
  mutable bool lanes_made_ = false;
};

// Builds the hierarchy of `comm` (collective over comm). `node_key`: this
// rank's node, as any non-negative integer shared by the ranks of one node; nullopt means
// the real nodes (MPI_Comm_split_type shared), or the pretend ones of
// VENEER_RANKS_PER_NODE. Returns nullptr on an intercommunicator or an MPI error.
std::unique_ptr<Hierarchy> build_hierarchy(MPI_Comm comm, std::optional<int> node_key = std::nullopt);

// The cached hierarchy of `comm`, built on first call (then collective over comm).
// Valid until comm is freed. nullptr where build_hierarchy would return it.
const Hierarchy* hierarchy(MPI_Comm comm);

// Drops the cached hierarchy of comm, if any (frees its communicators).
void forget_hierarchy(MPI_Comm comm);

// Hierarchies alive right now (cached or not), for tests of the cache's cleanup.
int live_hierarchies();

// Node sizes given as "k" or "3,2,3" (the list repeats over the ranks); nullopt on junk.
std::optional<std::vector<int>> parse_node_sizes(std::string_view text);
// Node of the rank at `index` when nodes have `sizes` (repeating).
int node_of_index(int index, const std::vector<int>& sizes);
// The pretend node sizes of VENEER_RANKS_PER_NODE, read at each call; nullopt if unset or junk.
std::optional<std::vector<int>> pretend_node_sizes_from_env();

}  // namespace veneer::topology
