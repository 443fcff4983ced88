// SPDX-License-Identifier: BSD-3-Clause
// The partitioner behind rank placement (topology/placement.h), without MPI:
// the graph it builds, the exact search against METIS on graphs small enough
// for both, exact part sizes, and placements that keep the identity where it
// is as good and move ranks where it is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "topology/placement.h"

namespace {

using veneer::topology::CommGraph;
using veneer::topology::Edge;
using veneer::topology::make_graph;
using veneer::topology::PartitionMethod;

std::vector<Edge> ring(int n, int64_t weight = 1) {
  std::vector<Edge> e;
  for (int v = 0; v < n; ++v) e.push_back({v, (v + 1) % n, weight});
  return e;
}

std::vector<int> sizes_of(const std::vector<int>& part_of, int parts) {
  std::vector<int> s(static_cast<size_t>(parts), 0);
  for (int p : part_of) ++s[static_cast<size_t>(p)];
  return s;
}

TEST(PlacementGraph, MergesBothDirectionsAndDropsSelfLoops) {
  const std::vector<Edge> edges{{0, 1, 3}, {1, 0, 4}, {2, 2, 9}, {1, 2, 0}, {2, 1, 5}, {0, 7, 1}};
  const CommGraph g = make_graph(3, edges);
  EXPECT_EQ(g.total_weight, 12);  // 0-1: 7, 1-2: 5; the self loop, the zero weight and vertex 7 count nothing
  ASSERT_EQ(g.offsets, (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(g.neighbours, (std::vector<int>{1, 0, 2, 1}));
  EXPECT_EQ(g.weights, (std::vector<int64_t>{7, 7, 5, 5}));
  EXPECT_EQ(veneer::topology::cut_weight(g, std::vector<int>{0, 0, 1}), 5);
}

TEST(PlacementPartition, ExactRingSplitsIntoArcs) {
  const CommGraph g = make_graph(8, ring(8));
  const std::vector<int> sizes{4, 4};
  const auto p = veneer::topology::partition_exact(g, sizes);
  EXPECT_EQ(p.method, PartitionMethod::exact);
  EXPECT_EQ(p.cut, 2);
  EXPECT_EQ(sizes_of(p.part_of, 2), sizes);
}

// METIS, repaired to exact sizes, against the optimum on random graphs.
TEST(PlacementPartition, MetisAgainstExactOnSmallGraphs) {
  std::mt19937 random(7);
  int64_t exact_total = 0, metis_total = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 8 + trial % 5;
    const std::vector<int> sizes =
        trial % 2 ? std::vector<int>{n / 2, n - n / 2} : std::vector<int>{n / 3, n / 3, n - 2 * (n / 3)};
    std::vector<Edge> edges;
    for (int e = 0; e < 3 * n; ++e)
      edges.push_back(
          {static_cast<int>(random() % n), static_cast<int>(random() % n), static_cast<int64_t>(1 + random() % 100)});
    const CommGraph g = make_graph(n, edges);
    const auto exact = veneer::topology::partition_exact(g, sizes);
    const auto metis = veneer::topology::partition_metis(g, sizes);
    ASSERT_EQ(sizes_of(exact.part_of, static_cast<int>(sizes.size())), sizes);
    ASSERT_EQ(sizes_of(metis.part_of, static_cast<int>(sizes.size())), sizes) << "trial " << trial;
    EXPECT_EQ(exact.cut, veneer::topology::cut_weight(g, exact.part_of));
    EXPECT_EQ(metis.cut, veneer::topology::cut_weight(g, metis.part_of));
    EXPECT_LE(exact.cut, metis.cut) << "trial " << trial;
    exact_total += exact.cut;
    metis_total += metis.cut;
  }
  // METIS (with the swaps after it) stays within 25% of the optimum over the set.
  EXPECT_LE(static_cast<double>(metis_total), 1.25 * static_cast<double>(exact_total));
  std::printf("cut summed over 40 random graphs: exact %lld, METIS %lld\n", static_cast<long long>(exact_total),
              static_cast<long long>(metis_total));
}

TEST(Placement, KeepsTheIdentityWhereItIsBest) {
  const CommGraph g = make_graph(4, ring(4));
  const auto p = veneer::topology::place(g, std::vector<int>{0, 0, 1, 1}, 2);
  EXPECT_FALSE(p.moves());
  EXPECT_EQ(p.cut_before, 2);
  EXPECT_EQ(p.cut_after, 2);
}

TEST(Placement, RoundRobinRingMovesHalfTheRanks) {
  const CommGraph g = make_graph(4, ring(4, 10));
  const std::vector<int> nodes{0, 1, 0, 1};
  const auto p = veneer::topology::place(g, nodes, 2);
  ASSERT_TRUE(p.moves());
  EXPECT_EQ(p.cut_before, 40);
  EXPECT_EQ(p.cut_after, 20);
  // A permutation, whose vertices sit two by two on the nodes along the ring.
  std::vector<int> sorted = p.vertex_of_rank;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3}));
  std::vector<int> node_of_vertex(4);
  for (int r = 0; r < 4; ++r)
    node_of_vertex[static_cast<size_t>(p.vertex_of_rank[static_cast<size_t>(r)])] = nodes[static_cast<size_t>(r)];
  EXPECT_EQ(veneer::topology::cut_weight(g, node_of_vertex), 20);
  // Each node keeps the one vertex of its arc that already lies there.
  int kept = 0;
  for (int r = 0; r < 4; ++r) kept += p.vertex_of_rank[static_cast<size_t>(r)] == r;
  EXPECT_EQ(kept, 2);
}

TEST(Placement, UnequalNodesGetTheirSizes) {
  const CommGraph g = make_graph(6, ring(6));
  const std::vector<int> nodes{0, 1, 2, 0, 1, 0};  // sizes 3, 2, 1
  const auto p = veneer::topology::place(g, nodes, 3);
  std::vector<int> node_of_vertex(6);
  for (int r = 0; r < 6; ++r)
    node_of_vertex[static_cast<size_t>(p.vertex_of_rank[static_cast<size_t>(r)])] = nodes[static_cast<size_t>(r)];
  EXPECT_EQ(sizes_of(node_of_vertex, 3), (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(p.cut_after, 3);  // three arcs of a ring
  EXPECT_EQ(veneer::topology::cut_weight(g, node_of_vertex), 3);
}

// Too many balanced assignments for the exact search: METIS places a 3-D grid.
TEST(Placement, LargeGridGoesThroughMetis) {
  constexpr int kSide = 8, kN = kSide * kSide * kSide;
  std::vector<Edge> edges;
  for (int z = 0; z < kSide; ++z)
    for (int y = 0; y < kSide; ++y)
      for (int x = 0; x < kSide; ++x) {
        const int v = (z * kSide + y) * kSide + x;
        edges.push_back({v, (z * kSide + y) * kSide + (x + 1) % kSide, 1});
        edges.push_back({v, (z * kSide + (y + 1) % kSide) * kSide + x, 1});
        edges.push_back({v, (((z + 1) % kSide) * kSide + y) * kSide + x, 1});
      }
  const CommGraph g = make_graph(kN, edges);
  // Every step along any axis changes (x + y + z) mod 8: every edge crosses nodes.
  std::vector<int> round_robin(kN);
  for (int r = 0; r < kN; ++r)
    round_robin[static_cast<size_t>(r)] = (r % kSide + r / kSide % kSide + r / (kSide * kSide)) % 8;
  const auto p = veneer::topology::place(g, round_robin, 8);
  EXPECT_EQ(p.method, PartitionMethod::metis);
  EXPECT_EQ(p.cut_before, 3 * kN);  // every edge crosses
  EXPECT_LE(p.cut_after, kN);       // 8 blocks of 4x4x4 cut 384 of the 1536 edges
  std::vector<int> node_of_vertex(kN);
  for (int r = 0; r < kN; ++r)
    node_of_vertex[static_cast<size_t>(p.vertex_of_rank[static_cast<size_t>(r)])] = round_robin[static_cast<size_t>(r)];
  EXPECT_EQ(sizes_of(node_of_vertex, 8), std::vector<int>(8, kN / 8));
  EXPECT_EQ(veneer::topology::cut_weight(g, node_of_vertex), p.cut_after);
}

}  // namespace

// ---- sockets within nodes ----

// Where rank r's vertex lands: group_of_rank[r] for the vertex it plays.
std::vector<int> played_on(const veneer::topology::Placement& p, const std::vector<int>& group_of_rank) {
  std::vector<int> group_of_vertex(group_of_rank.size());
  for (size_t r = 0; r < group_of_rank.size(); ++r)
    group_of_vertex[static_cast<size_t>(p.vertex_of_rank[r])] = group_of_rank[r];
  return group_of_vertex;
}

bool is_permutation_of_ranks(const std::vector<int>& vertex_of_rank) {
  std::vector<int> sorted = vertex_of_rank;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int>(i)) return false;
  return true;
}

TEST(PlacementSockets, OneNodeTwoSocketsHoldTheHeavyPairs) {
  // Heavy 0-2 and 1-3, light 0-1 and 2-3; ranks 0,1 on socket 0, ranks 2,3 on socket 1.
  const CommGraph g = make_graph(4, std::vector<Edge>{{0, 2, 100}, {1, 3, 100}, {0, 1, 1}, {2, 3, 1}});
  const std::vector<int> nodes{0, 0, 0, 0}, sockets{0, 0, 1, 1};
  const auto p = veneer::topology::place(g, nodes, 1, sockets, 2);
  ASSERT_TRUE(p.moves());
  EXPECT_TRUE(p.gains());
  EXPECT_TRUE(is_permutation_of_ranks(p.vertex_of_rank));
  EXPECT_EQ(p.cut_before, 0);
  EXPECT_EQ(p.cut_after, 0);
  EXPECT_EQ(p.socket_cut_before, 200);
  EXPECT_EQ(p.socket_cut_after, 2);
  const std::vector<int> socket_of_vertex = played_on(p, sockets);
  EXPECT_EQ(socket_of_vertex[0], socket_of_vertex[2]);
  EXPECT_EQ(socket_of_vertex[1], socket_of_vertex[3]);
  EXPECT_EQ(veneer::topology::cut_weight(g, socket_of_vertex), 2);
  // Ranks 0 and 3 (or 1 and 2) keep their vertices: one of each heavy pair stays.
  int kept = 0;
  for (int r = 0; r < 4; ++r) kept += p.vertex_of_rank[static_cast<size_t>(r)] == r;
  EXPECT_EQ(kept, 2);
  EXPECT_NE(p.describe().find("sockets 200 -> 2"), std::string::npos) << p.describe();
}

TEST(PlacementSockets, NodesFirstThenSockets) {
  // Four heavy pairs (0-1, 2-3, 4-5, 6-7), medium links 1-2 and 5-6, light 3-4 and 7-0.
  const CommGraph g = make_graph(
      8, std::vector<Edge>{
             {0, 1, 100}, {2, 3, 100}, {4, 5, 100}, {6, 7, 100}, {1, 2, 10}, {5, 6, 10}, {3, 4, 1}, {7, 0, 1}});
  // Round-robin over two nodes; on each node its first two ranks on one socket.
  const std::vector<int> nodes{0, 1, 0, 1, 0, 1, 0, 1}, sockets{0, 1, 0, 1, 2, 3, 2, 3};
  const auto p = veneer::topology::place(g, nodes, 2, sockets, 4);
  ASSERT_TRUE(p.moves());
  EXPECT_TRUE(is_permutation_of_ranks(p.vertex_of_rank));
  EXPECT_EQ(p.cut_after, 2);  // {0..3} and {4..7}
  EXPECT_EQ(veneer::topology::cut_weight(g, played_on(p, nodes)), 2);
  EXPECT_EQ(p.socket_cut_after, 22);  // and the medium links inside each node
  const std::vector<int> socket_of_vertex = played_on(p, sockets);
  for (int v = 0; v < 8; v += 2)
    EXPECT_EQ(socket_of_vertex[static_cast<size_t>(v)], socket_of_vertex[static_cast<size_t>(v) + 1]) << v;
  EXPECT_EQ(veneer::topology::cut_weight(g, socket_of_vertex), 22);
}

TEST(PlacementSockets, WithinNodesOnlyWhenNodesMustStay) {
  const CommGraph g = make_graph(4, std::vector<Edge>{{0, 2, 100}, {1, 3, 100}, {0, 1, 1}, {2, 3, 1}});
  // Two nodes (ranks 0,1 and 2,3), one socket per rank: nothing to gain within a node.
  const std::vector<int> nodes{0, 1, 0, 1}, sockets{0, 2, 1, 3};
  const auto moved = veneer::topology::place(g, nodes, 2, sockets, 4);
  EXPECT_FALSE(moved.moves());  // the heavy pairs already share a node
  const std::vector<int> blocks{0, 0, 1, 1}, block_sockets{0, 1, 2, 3};
  const auto across = veneer::topology::place(g, blocks, 2, block_sockets, 4);
  EXPECT_TRUE(across.moves());
  EXPECT_EQ(across.cut_after, 2);
  const auto stay = veneer::topology::place(g, blocks, 2, block_sockets, 4, false);
  EXPECT_FALSE(stay.moves());  // every vertex stays on its node; one rank per socket
  EXPECT_FALSE(stay.gains());
}

TEST(PlacementSockets, WithoutSocketsAsBefore) {
  const CommGraph g = make_graph(4, ring(4, 10));
  const std::vector<int> nodes{0, 1, 0, 1};
  const auto plain = veneer::topology::place(g, nodes, 2);
  const auto same = veneer::topology::place(g, nodes, 2, nodes, 2);
  EXPECT_EQ(plain.vertex_of_rank, same.vertex_of_rank);
  EXPECT_EQ(same.socket_cut_before, -1);
  EXPECT_EQ(plain.describe(), same.describe());
}

TEST(PlacementSockets, SocketsNumberedByLowestRank) {
  int count = 0;
  EXPECT_EQ(veneer::topology::number_sockets(std::vector<int>{0, 0, 1, 1, 0}, std::vector<int>{0, 1, 0, 0, 1}, count),
            (std::vector<int>{0, 1, 2, 2, 1}));
  EXPECT_EQ(count, 3);
  // A rank of node 0 whose package is unknown: node 0 is one socket.
  EXPECT_EQ(veneer::topology::number_sockets(std::vector<int>{0, 0, 1, 1, 0}, std::vector<int>{1, -1, 0, 1, 0}, count),
            (std::vector<int>{0, 0, 1, 2, 0}));
  EXPECT_EQ(count, 3);
}
