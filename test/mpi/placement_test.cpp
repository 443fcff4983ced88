// SPDX-License-Identifier: BSD-3-Clause
// Rank placement of process topologies created with reorder true
// (interposer/topology_create.cpp): every constructor, reorder true and
// false, weighted and unweighted, on pretend nodes (VENEER_RANKS_PER_NODE,
// set per registration in CMakeLists.txt) or on the hosts of test/cluster. On the new communicator, the
// process with new rank k must answer every query with vertex k's lists
// (neighbours, weights, coordinates) and a neighbourhood exchange must
// deliver each neighbour's data. Where placement is on, the new ranks must
// sit on the nodes of an optimal placement (found here by trying every
// permutation) when that cuts less than the identity, and be the identity
// otherwise; with reorder false or VENEER_PLACEMENT=0 Veneer must not move anyone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "test/mpi/ranks.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace veneer {
std::string placement_report_text();
}

namespace {

bool placement_on() {
  const char* v = std::getenv("VENEER_PLACEMENT");
  return !v || std::strcmp(v, "0") != 0;
}

// The node of every world rank: the pretend nodes of VENEER_RANKS_PER_NODE,
// else the hosts (test/cluster), numbered by their lowest rank. On one node,
// its sockets instead where it has several (VENEER_RANKS_PER_SOCKET=k, or
// the packages the ranks are bound to, as Veneer reads them): placement then
// has them as its only level, and the same checks hold. (The nodes of the
// registered runs with several nodes hold at most two ranks, which no
// placement over their sockets can improve.)
std::vector<int> world_nodes() {
  const int n = size_of();
  std::vector<int> nodes(static_cast<size_t>(n), 0);
  if (auto sizes = veneer::topology::pretend_node_sizes_from_env()) {
    for (int r = 0; r < n; ++r) nodes[static_cast<size_t>(r)] = veneer::topology::node_of_index(r, *sizes);
    return nodes;
  }
  int64_t mine = veneer::topology::host_key();
  std::vector<int64_t> keys(nodes.size());
  MPI_Allgather(&mine, 1, MPI_INT64_T, keys.data(), 1, MPI_INT64_T, MPI_COMM_WORLD);
  std::map<int64_t, int> node_of_key;
  for (size_t r = 0; r < keys.size(); ++r)
    nodes[r] = node_of_key.try_emplace(keys[r], static_cast<int>(node_of_key.size())).first->second;
  if (node_of_key.size() > 1) return nodes;
  const auto k = veneer::topology::pretend_socket_size_from_env();
  const int package = k                                          ? rank_of() / *k
                      : veneer::topology::machine().packages > 1 ? veneer::topology::machine().bound_package
                                                                 : 0;
  std::vector<int> packages(nodes.size());
  MPI_Allgather(&package, 1, MPI_INT, packages.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int sockets = 0;
  return veneer::topology::number_sockets(nodes, packages, sockets);
}

// Undirected weights between vertices, as the test's own model of each constructor.
using Weights = std::map<std::pair<int, int>, long>;
void add(Weights& w, int a, int b, long weight) {
  if (a != b && weight > 0) w[{std::min(a, b), std::max(a, b)}] += weight;
}
long cut(const Weights& w, const std::vector<int>& node_of_vertex) {
  long c = 0;
  for (const auto& [pair, weight] : w)
    if (node_of_vertex[static_cast<size_t>(pair.first)] != node_of_vertex[static_cast<size_t>(pair.second)])
      c += weight;
  return c;
}
// The smallest cut of any placement of the vertices on the ranks' nodes.
long best_cut(const Weights& w, const std::vector<int>& nodes) {
  std::vector<int> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  long best = cut(w, nodes);
  do {
    std::vector<int> node_of_vertex(nodes.size());
    for (size_t r = 0; r < nodes.size(); ++r) node_of_vertex[static_cast<size_t>(order[r])] = nodes[r];
    best = std::min(best, cut(w, node_of_vertex));
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

// Checks where the processes of `c` (created from MPI_COMM_WORLD with
// reorder `reorder`) landed: the world rank behind every new rank.
void check_placement(MPI_Comm c, const Weights& w, bool reorder) {
  const int n = size_of();
  std::vector<int> who(static_cast<size_t>(n));
  int me = rank_of();
  MPI_Allgather(&me, 1, MPI_INT, who.data(), 1, MPI_INT, c);
  const std::vector<int> nodes = world_nodes();
  std::vector<int> node_of_vertex(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k)
    node_of_vertex[static_cast<size_t>(k)] = nodes[static_cast<size_t>(who[static_cast<size_t>(k)])];
  const long before = cut(w, nodes), best = best_cut(w, nodes), after = cut(w, node_of_vertex);
  std::vector<int> identity(static_cast<size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  if (reorder && placement_on() && best < before) {
    EXPECT_EQ(after, best) << "cut before " << before;
  } else if (!reorder || placement_on()) {
    // reorder false: the identity by definition; no gain: Veneer's answer is the identity.
    EXPECT_EQ(who, identity) << "cut before " << before << ", best " << best;
  }
  // Else (reorder true, VENEER_PLACEMENT=0): the library's own choice, nothing to assert on.
}

// ---- distributed graphs ----

// Vertex v's lists: out to v+2 and v+1, in from v-2 and v-1 (mod n), heavy
// (1000 + v) along the +-2 edges, light (1 + v) along the +-1 ones.
struct Lists {
  std::vector<int> in, in_weights, out, out_weights;
};
Lists lists_of(int v, int n, bool only_far = false) {
  Lists l;
  l.out = {(v + 2) % n, (v + 1) % n};
  l.out_weights = {1000 + v, 1 + v};
  l.in = {(v + n - 2) % n, (v + n - 1) % n};
  l.in_weights = {1000 + v, 1 + v};
  if (only_far) {
    for (auto* list : {&l.in, &l.in_weights, &l.out, &l.out_weights}) list->pop_back();
  }
  return l;
}
Weights weights_of_lists(int n, bool weighted, bool only_far) {
  Weights w;
  for (int v = 0; v < n; ++v) {
    const Lists l = lists_of(v, n, only_far);
    for (size_t i = 0; i < l.out.size(); ++i) add(w, v, l.out[i], weighted ? l.out_weights[i] : 1);
    for (size_t i = 0; i < l.in.size(); ++i) add(w, l.in[i], v, weighted ? l.in_weights[i] : 1);
  }
  return w;
}

// Each neighbour sends me (its rank * 100 + the index of me in its out list).
void check_exchange(MPI_Comm c, const std::vector<int>& sources, const std::vector<int>& destinations,
                    const std::map<int, std::vector<int>>& out_of) {
  std::vector<int> send(destinations.size()), recv(sources.size(), -1);
  for (size_t i = 0; i < destinations.size(); ++i) send[i] = rank_of(c) * 100 + static_cast<int>(i);
  ASSERT_EQ(MPI_Neighbor_alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, c), MPI_SUCCESS);
  for (size_t j = 0; j < sources.size(); ++j) {
    const std::vector<int>& theirs = out_of.at(sources[j]);
    const auto at = std::find(theirs.begin(), theirs.end(), rank_of(c)) - theirs.begin();
    EXPECT_EQ(recv[j], sources[j] * 100 + static_cast<int>(at)) << "from source " << j;
  }
}

void check_adjacent(bool weighted, int reorder, bool only_far) {
  const int n = size_of();
  if (n < 3) GTEST_SKIP() << "needs 3 ranks (distinct neighbours)";
  const Lists mine = lists_of(rank_of(), n, only_far);
  MPI_Comm g = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(
                MPI_COMM_WORLD, static_cast<int>(mine.in.size()), mine.in.data(),
                weighted ? mine.in_weights.data() : MPI_UNWEIGHTED, static_cast<int>(mine.out.size()), mine.out.data(),
                weighted ? mine.out_weights.data() : MPI_UNWEIGHTED, MPI_INFO_NULL, reorder, &g),
            MPI_SUCCESS);
  const int k = rank_of(g);
  const Lists want = lists_of(k, n, only_far);
  int kind = MPI_UNDEFINED;
  MPI_Topo_test(g, &kind);
  EXPECT_EQ(kind, MPI_DIST_GRAPH);
  int indegree = -1, outdegree = -1, is_weighted = -1;
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &is_weighted);
  ASSERT_EQ(indegree, static_cast<int>(want.in.size()));
  ASSERT_EQ(outdegree, static_cast<int>(want.out.size()));
  EXPECT_EQ(is_weighted != 0, weighted);
  Lists got;
  got.in.resize(want.in.size());
  got.in_weights.resize(want.in.size());
  got.out.resize(want.out.size());
  got.out_weights.resize(want.out.size());
  MPI_Dist_graph_neighbors(g, indegree, got.in.data(), got.in_weights.data(), outdegree, got.out.data(),
                           got.out_weights.data());
  EXPECT_EQ(got.in, want.in) << "new rank " << k;
  EXPECT_EQ(got.out, want.out) << "new rank " << k;
  if (weighted) {
    EXPECT_EQ(got.in_weights, want.in_weights) << "new rank " << k;
    EXPECT_EQ(got.out_weights, want.out_weights) << "new rank " << k;
  }
  std::map<int, std::vector<int>> out_of;
  for (int v = 0; v < n; ++v) out_of[v] = lists_of(v, n, only_far).out;
  check_exchange(g, want.in, want.out, out_of);
  check_placement(g, weights_of_lists(n, weighted, only_far), reorder != 0);
  MPI_Comm_free(&g);
}

TEST(Placement, AdjacentWeightedReorder) { check_adjacent(true, 1, false); }
TEST(Placement, AdjacentWeightedNoReorder) { check_adjacent(true, 0, false); }
TEST(Placement, AdjacentUnweightedReorder) { check_adjacent(false, 1, true); }
TEST(Placement, AdjacentUnweightedNoReorder) { check_adjacent(false, 0, true); }
TEST(Placement, AdjacentUnweightedRingReorder) { check_adjacent(false, 1, false); }

// MPI_Dist_graph_create: rank r declares vertex (r + 1)'s out-edges, so
// who declares an edge has nothing to do with who plays its vertices.
void check_dist_graph(bool weighted, int reorder) {
  const int n = size_of();
  if (n < 3) GTEST_SKIP() << "needs 3 ranks (distinct neighbours)";
  const int declared = (rank_of() + 1) % n;
  const Lists theirs = lists_of(declared, n);
  const int degree = static_cast<int>(theirs.out.size());
  MPI_Comm g = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &declared, &degree, theirs.out.data(),
                                  weighted ? theirs.out_weights.data() : MPI_UNWEIGHTED, MPI_INFO_NULL, reorder, &g),
            MPI_SUCCESS);
  const int k = rank_of(g);
  int indegree = -1, outdegree = -1, is_weighted = -1;
  MPI_Dist_graph_neighbors_count(g, &indegree, &outdegree, &is_weighted);
  const Lists want = lists_of(k, n);
  ASSERT_EQ(outdegree, static_cast<int>(want.out.size()));
  ASSERT_EQ(indegree, static_cast<int>(want.in.size()));
  std::vector<int> in(static_cast<size_t>(indegree)), inw(in.size()), out(static_cast<size_t>(outdegree)),
      outw(out.size());
  MPI_Dist_graph_neighbors(g, indegree, in.data(), inw.data(), outdegree, out.data(), outw.data());
  // The order of MPI_Dist_graph_create's lists is the library's: compare as sets of (neighbour, weight).
  auto pairs = [&](const std::vector<int>& ranks, const std::vector<int>& w) {
    std::vector<std::pair<int, int>> p;
    for (size_t i = 0; i < ranks.size(); ++i) p.emplace_back(ranks[i], weighted ? w[i] : 0);
    std::sort(p.begin(), p.end());
    return p;
  };
  // In-edge weights: the weight the source gave the edge to k.
  std::vector<int> want_in_weights;
  for (int s : want.in) {
    const Lists l = lists_of(s, n);
    want_in_weights.push_back(
        l.out_weights[static_cast<size_t>(std::find(l.out.begin(), l.out.end(), k) - l.out.begin())]);
  }
  EXPECT_EQ(pairs(out, outw), pairs(want.out, want.out_weights)) << "new rank " << k;
  EXPECT_EQ(pairs(in, inw), pairs(want.in, want_in_weights)) << "new rank " << k;
  std::map<int, std::vector<int>> out_of;
  for (int v = 0; v < n; ++v) {
    // The library's order of v's out list (asked of v, shared with all).
    out_of[v].resize(want.out.size());
  }
  std::vector<int> all_out(static_cast<size_t>(n) * want.out.size());
  MPI_Allgather(out.data(), outdegree, MPI_INT, all_out.data(), outdegree, MPI_INT, g);
  for (int v = 0; v < n; ++v)
    std::copy_n(all_out.begin() + static_cast<long>(v * want.out.size()), want.out.size(), out_of[v].begin());
  check_exchange(g, in, out, out_of);
  Weights w;
  for (int v = 0; v < n; ++v) {
    const Lists l = lists_of(v, n);
    for (size_t i = 0; i < l.out.size(); ++i) add(w, v, l.out[i], weighted ? l.out_weights[i] : 1);
  }
  check_placement(g, w, reorder != 0);
  MPI_Comm_free(&g);
}

TEST(Placement, DistGraphWeightedReorder) { check_dist_graph(true, 1); }
TEST(Placement, DistGraphWeightedNoReorder) { check_dist_graph(true, 0); }
TEST(Placement, DistGraphUnweightedReorder) { check_dist_graph(false, 1); }
TEST(Placement, DistGraphUnweightedNoReorder) { check_dist_graph(false, 0); }

// ---- Cartesian grids ----

void check_cart(std::vector<int> dims, std::vector<int> periods, int reorder) {
  const int n = size_of();
  const int ndims = static_cast<int>(dims.size());
  int product = 1;
  for (int d : dims) product *= d;
  if (product != n) GTEST_SKIP() << "grid for another size";
  MPI_Comm c = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, ndims, dims.data(), periods.data(), reorder, &c), MPI_SUCCESS);
  const int k = rank_of(c);
  // Row-major coordinates of k, and the grid's edges (weight dims[d] along d, both ways).
  auto coords_of = [&](int v) {
    std::vector<int> x(static_cast<size_t>(ndims));
    for (int d = ndims - 1; d >= 0; --d) {
      x[static_cast<size_t>(d)] = v % dims[static_cast<size_t>(d)];
      v /= dims[static_cast<size_t>(d)];
    }
    return x;
  };
  auto rank_at = [&](std::vector<int> x) {
    int v = 0;
    for (int d = 0; d < ndims; ++d) v = v * dims[static_cast<size_t>(d)] + x[static_cast<size_t>(d)];
    return v;
  };
  std::vector<int> coords(static_cast<size_t>(ndims));
  MPI_Cart_coords(c, k, ndims, coords.data());
  EXPECT_EQ(coords, coords_of(k));
  int back = -1;
  MPI_Cart_rank(c, coords.data(), &back);
  EXPECT_EQ(back, k);
  Weights w;
  // neighbours[2d], [2d+1]: at -1 and +1 along d, MPI_PROC_NULL past an open border.
  auto neighbour = [&](int v, int d, int step) {
    std::vector<int> x = coords_of(v);
    int& at = x[static_cast<size_t>(d)];
    at += step;
    if (at < 0 || at >= dims[static_cast<size_t>(d)]) {
      if (!periods[static_cast<size_t>(d)]) return MPI_PROC_NULL;
      at = (at + dims[static_cast<size_t>(d)]) % dims[static_cast<size_t>(d)];
    }
    return rank_at(x);
  };
  for (int v = 0; v < n; ++v)
    for (int d = 0; d < ndims; ++d)
      for (int step : {-1, 1})
        if (int u = neighbour(v, d, step); u != MPI_PROC_NULL) add(w, v, u, dims[static_cast<size_t>(d)]);
  std::vector<int> send(2 * static_cast<size_t>(ndims)), recv(send.size(), -7);
  for (int d = 0; d < ndims; ++d) {
    int below = -2, above = -2;
    MPI_Cart_shift(c, d, 1, &below, &above);
    EXPECT_EQ(below, neighbour(k, d, -1));
    EXPECT_EQ(above, neighbour(k, d, 1));
    send[2 * static_cast<size_t>(d)] = k * 100 + 2 * d;
    send[2 * static_cast<size_t>(d) + 1] = k * 100 + 2 * d + 1;
  }
  ASSERT_EQ(MPI_Neighbor_alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, c), MPI_SUCCESS);
  for (int d = 0; d < ndims; ++d) {
    // From below: what it sent upwards (slot 2d+1); from above: what it sent downwards (slot 2d).
    const int below = neighbour(k, d, -1), above = neighbour(k, d, 1);
    EXPECT_EQ(recv[2 * static_cast<size_t>(d)], below == MPI_PROC_NULL ? -7 : below * 100 + 2 * d + 1);
    EXPECT_EQ(recv[2 * static_cast<size_t>(d) + 1], above == MPI_PROC_NULL ? -7 : above * 100 + 2 * d);
  }
  check_placement(c, w, reorder != 0);
  MPI_Comm_free(&c);
}

TEST(Placement, CartOpenGridReorder) { check_cart({2, 2}, {0, 0}, 1); }
TEST(Placement, CartOpenGridNoReorder) { check_cart({2, 2}, {0, 0}, 0); }
TEST(Placement, CartPeriodicLineReorder) { check_cart({size_of()}, {1}, 1); }
TEST(Placement, CartMixedGridReorder) { check_cart({size_of() / 2 > 0 ? size_of() / 2 : 1, 2}, {1, 0}, 1); }

// A grid over fewer processes than the communicator is the library's business.
TEST(Placement, CartSmallerThanCommunicatorPasses) {
  const int n = size_of();
  if (n < 2) GTEST_SKIP();
  int dims = n - 1, periods = 0;
  MPI_Comm c = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 1, &dims, &periods, 1, &c), MPI_SUCCESS);
  EXPECT_EQ(c == MPI_COMM_NULL, rank_of() == n - 1);
  if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

// ---- general graphs ----

void check_graph(int reorder) {
  const int n = size_of();
  if (n < 3) GTEST_SKIP() << "needs 3 ranks";
  // Vertex v: neighbours v + 2 and v - 2 (mod n), once each (one neighbour when they are the same).
  std::vector<std::vector<int>> adjacency(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    adjacency[static_cast<size_t>(v)] = {(v + 2) % n};
    if ((v + n - 2) % n != (v + 2) % n) adjacency[static_cast<size_t>(v)].push_back((v + n - 2) % n);
  }
  std::vector<int> index, edges;
  for (const auto& list : adjacency) {
    edges.insert(edges.end(), list.begin(), list.end());
    index.push_back(static_cast<int>(edges.size()));
  }
  MPI_Comm g = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Graph_create(MPI_COMM_WORLD, n, index.data(), edges.data(), reorder, &g), MPI_SUCCESS);
  const int k = rank_of(g);
  int kind = MPI_UNDEFINED, count = -1;
  MPI_Topo_test(g, &kind);
  EXPECT_EQ(kind, MPI_GRAPH);
  MPI_Graph_neighbors_count(g, k, &count);
  ASSERT_EQ(count, static_cast<int>(adjacency[static_cast<size_t>(k)].size()));
  std::vector<int> neighbours(static_cast<size_t>(count));
  MPI_Graph_neighbors(g, k, count, neighbours.data());
  EXPECT_EQ(neighbours, adjacency[static_cast<size_t>(k)]) << "new rank " << k;
  std::map<int, std::vector<int>> out_of;
  Weights w;
  for (int v = 0; v < n; ++v) {
    out_of[v] = adjacency[static_cast<size_t>(v)];
    for (int u : adjacency[static_cast<size_t>(v)]) add(w, v, u, 1);
  }
  check_exchange(g, neighbours, neighbours, out_of);
  check_placement(g, w, reorder != 0);
  MPI_Comm_free(&g);
}

TEST(Placement, GraphReorder) { check_graph(1); }
TEST(Placement, GraphNoReorder) { check_graph(0); }

// What the report says: topologies placed or kept, none with placement off.
TEST(Placement, ReportCountsDecisions) {
  const std::string text = veneer::placement_report_text();
  const bool several_nodes = world_nodes() != std::vector<int>(static_cast<size_t>(size_of()), 0);
  if (!placement_on() || !several_nodes || size_of() < 3) {
    EXPECT_EQ(text, "");
  } else {
    EXPECT_NE(text.find("topologies placed"), std::string::npos) << text;
    EXPECT_NE(text.find("cut "), std::string::npos) << text;
  }
}

}  // namespace
