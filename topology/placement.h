// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Rank placement for process topologies created with reorder true: which
// process plays which graph vertex, so that heavy edges stay inside a node.
//
// Pure computation (no MPI): the caller (interposer/topology_create.cpp)
// gathers the communication graph and the node of every rank, asks place(),
// and builds the reordered communicator from the answer. Every rank calls it
// on identical data and gets identical answers (METIS runs with a fixed seed;
// the exact search and the repairs are deterministic).
//
// The graph is undirected: an edge u->v declared with weight w and v->u with
// weight x become one edge of weight w + x; self loops and zero weights count
// nothing (they cost the same wherever the vertex runs).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace veneer::topology {

struct Edge {
  int from = 0;
  int to = 0;
  int64_t weight = 1;
};

// Symmetric compressed rows: the neighbours of v are
// neighbours[offsets[v] .. offsets[v+1]), with their merged weights.
struct CommGraph {
  int vertices = 0;
  std::vector<int64_t> offsets;
  std::vector<int> neighbours;
  std::vector<int64_t> weights;
  int64_t total_weight = 0;  // every undirected edge once
};

// The undirected graph of `edges` over `vertices` vertices (edges naming a
// vertex outside [0, vertices) are dropped: callers validate first).
CommGraph make_graph(int vertices, std::span<const Edge> edges);

// Weight of the edges whose ends lie in different parts.
int64_t cut_weight(const CommGraph& g, std::span<const int> part_of);

// How a partition was found.
enum class PartitionMethod { identity, exact, metis, greedy };  // greedy: built without METIS
const char* method_name(PartitionMethod m);

// Vertices assigned to parts of exactly `part_sizes[p]` vertices each
// (sum == g.vertices), minimising the cut. Exact search (branch and bound)
// when the balanced assignments are few (up to `exact_limit`), otherwise
// METIS_PartGraphKway with the sizes as target weights, repaired to the exact
// sizes and improved by greedy swaps. Empty where METIS fails.
struct Partition {
  std::vector<int> part_of;
  int64_t cut = 0;
  PartitionMethod method = PartitionMethod::identity;
};
Partition partition(const CommGraph& g, std::span<const int> part_sizes, int64_t exact_limit = 200000);
// The same, by the named method only (for tests that compare the two).
Partition partition_exact(const CommGraph& g, std::span<const int> part_sizes);
Partition partition_metis(const CommGraph& g, std::span<const int> part_sizes);

// The placement of one topology: rank r of the old communicator plays vertex
// vertex_of_rank[r], i.e. gets new rank vertex_of_rank[r].
struct Placement {
  std::vector<int> vertex_of_rank;
  int64_t cut_before = 0;  // the identity: vertex r on rank r's node
  int64_t cut_after = 0;
  int64_t total_weight = 0;
  PartitionMethod method = PartitionMethod::identity;
  // The second level, where some node has several sockets: the weight
  // between vertices on different sockets (between nodes included), before
  // and after; -1 where sockets were not considered.
  int64_t socket_cut_before = -1;
  int64_t socket_cut_after = -1;
  bool moves() const;  // some rank plays another vertex
  // True where the placement cuts less between nodes, or as much between
  // nodes and less between sockets.
  bool gains() const;
  // "cut 24 -> 12 of 48 (exact)", with "; sockets 30 -> 18" where sockets counted.
  std::string describe() const;
};

// The placement of graph `g` (one vertex per rank) on ranks whose nodes are
// `node_of_rank` (nodes 0 .. node_count-1). Vertices of a part go to one node,
// ranks of a node that already play a vertex of its part keep it, and parts
// go to the nodes of their size holding most of their vertices, so the
// identity is kept wherever it is as good. The identity when nothing cuts less.
Placement place(const CommGraph& g, std::span<const int> node_of_rank, int node_count);

// The same over two levels: first the nodes (unless `across_nodes` is false:
// every rank then stays on its node), then within each node its sockets
// (`socket_of_rank`: sockets 0 .. socket_count-1, each inside one node), the
// vertices a node plays partitioned over its sockets by the same rules.
Placement place(const CommGraph& g, std::span<const int> node_of_rank, int node_count,
                std::span<const int> socket_of_rank, int socket_count, bool across_nodes = true);

// Sockets numbered over a communicator, in the order of their lowest rank:
// rank r runs on node node_of_rank[r] and on package package_of_rank[r] of
// that node (-1: unknown). A node with a rank whose package is unknown is one
// socket. `socket_count` gets the number of sockets.
std::vector<int> number_sockets(std::span<const int> node_of_rank, std::span<const int> package_of_rank,
                                int& socket_count);

}  // namespace veneer::topology
