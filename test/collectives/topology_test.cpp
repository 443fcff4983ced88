// SPDX-License-Identifier: BSD-3-Clause
// hwloc discovery (from an XML file and a synthetic description), the node
// size grammar, and per-communicator hierarchies: pretend nodes from the
// environment, sub-communicators, non-consecutive nodes, and the cache's
// cleanup when a communicator is freed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "test/collectives/harness.h"
#include "topology/hierarchy.h"
#include "topology/machine.h"

namespace veneer::test {
namespace {

using topology::Hierarchy;

TEST(Topology, ReadsMachineFromXml) {
  std::string error;
  auto m = topology::discover_machine({VENEER_TEST_DATA "/two_sockets.xml", ""}, &error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->packages, 2);
  EXPECT_EQ(m->numa_nodes, 2);
  EXPECT_EQ(m->cores, 4);
  EXPECT_EQ(m->pus, 4);
  ASSERT_EQ(m->caches.size(), 1u);
  EXPECT_EQ(m->caches[0].level, 3);
  EXPECT_EQ(m->caches[0].bytes, 16 << 20);
  EXPECT_EQ(m->caches[0].instances, 2);
  ASSERT_EQ(m->gpus(), 1);
  ASSERT_EQ(m->nics(), 1);
  for (const auto& d : m->devices) {
    if (d.kind == topology::DeviceKind::gpu) {
      EXPECT_EQ(d.name, "cuda0");
      EXPECT_EQ(d.bus_id, "0000:40:00.0");
      EXPECT_EQ(d.numa_node, 1);
      EXPECT_EQ(d.package, 1);
    } else {
      EXPECT_EQ(d.name, "mlx5_0");
      EXPECT_EQ(d.numa_node, 0);
      EXPECT_EQ(d.package, 0);
    }
  }
  EXPECT_NE(m->summary().find("GPUs: cuda0@numa1"), std::string::npos) << m->summary();
  EXPECT_NE(m->summary().find("NICs: mlx5_0@numa0"), std::string::npos) << m->summary();
}

TEST(Topology, ReadsSyntheticMachine) {
  auto m = topology::discover_machine({"", "pack:2 numa:2 core:4 pu:2"});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->packages, 2);
  EXPECT_EQ(m->numa_nodes, 4);
  EXPECT_EQ(m->cores, 16);
  EXPECT_EQ(m->pus, 32);
  EXPECT_EQ(m->gpus(), 0);
  std::string error;
  EXPECT_FALSE(topology::discover_machine({"", "not a topology"}, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(topology::discover_machine({"/nonexistent.xml", ""}));
}

TEST(Topology, ThisMachineHasCores) {
  const auto& m = topology::machine();
  EXPECT_GE(m.pus, 1) << m.summary();
  EXPECT_GE(m.cores, 1);
  EXPECT_FALSE(m.summary().empty());
  // The package holding the binding: where there is one package, it holds any binding.
  if (m.packages == 1 && m.bound_pus > 0) EXPECT_EQ(m.bound_package, 0);
  if (m.bound_package >= 0) EXPECT_LT(m.bound_package, m.packages);
  // A synthetic machine describes no process: no binding, no package.
  auto synthetic = topology::discover_machine({"", "pack:2 core:1 pu:1"});
  ASSERT_TRUE(synthetic);
  EXPECT_EQ(synthetic->bound_package, -1);
}

TEST(Topology, PretendSocketsFromTheEnvironment) {
  EXPECT_FALSE(topology::pretend_socket_size_from_env());
  setenv("VENEER_RANKS_PER_SOCKET", "4", 1);
  EXPECT_EQ(topology::pretend_socket_size_from_env(), 4);
  setenv("VENEER_RANKS_PER_SOCKET", "0", 1);
  EXPECT_FALSE(topology::pretend_socket_size_from_env());
  setenv("VENEER_RANKS_PER_SOCKET", "two", 1);
  EXPECT_FALSE(topology::pretend_socket_size_from_env());
  unsetenv("VENEER_RANKS_PER_SOCKET");
}

TEST(Topology, NodeSizeGrammar) {
  EXPECT_EQ(topology::parse_node_sizes("4"), (std::vector<int>{4}));
  EXPECT_EQ(topology::parse_node_sizes("3,2,3"), (std::vector<int>{3, 2, 3}));
  for (const char* junk : {"", "0", "-1", "a", "3,,2", "3,", ",3", "2x"})
    EXPECT_FALSE(topology::parse_node_sizes(junk)) << junk;
  const std::vector<int> mixed{3, 2, 3};
  const int expected[] = {0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4};  // the list repeats
  for (int i = 0; i < 12; ++i) EXPECT_EQ(topology::node_of_index(i, mixed), expected[i]) << i;
  EXPECT_EQ(topology::node_of_index(5, {2}), 2);
}

// Checks every field of h against nodes given as a node index per rank.
void expect_hierarchy(const Hierarchy& h, const std::vector<int>& node_of_rank, MPI_Comm parent = MPI_COMM_WORLD) {
  const int p = static_cast<int>(node_of_rank.size());
  ASSERT_EQ(h.size, p);
  // Nodes are numbered by first appearance.
  std::vector<int> renumber(static_cast<size_t>(p) + 64, -1);
  std::vector<std::vector<int>> members;
  for (int r = 0; r < p; ++r) {
    int& n = renumber[static_cast<size_t>(node_of_rank[static_cast<size_t>(r)])];
    if (n < 0) {
      n = static_cast<int>(members.size());
      members.emplace_back();
    }
    members[static_cast<size_t>(n)].push_back(r);
  }
  EXPECT_EQ(h.node_count, static_cast<int>(members.size()));
  EXPECT_EQ(h.node_ranks, members);
  bool consecutive = true, equal = true;
  for (const auto& m : members) {
    consecutive = consecutive && m.back() - m.front() + 1 == static_cast<int>(m.size());
    equal = equal && m.size() == members[0].size();
  }
  EXPECT_EQ(h.node_consecutive, consecutive);
  EXPECT_EQ(h.equal_ranks_per_node, equal);
  const auto& mine = members[static_cast<size_t>(h.node_index)];
  EXPECT_EQ(h.node_size, static_cast<int>(mine.size()));
  EXPECT_EQ(mine[static_cast<size_t>(h.node_rank)], h.rank);
  // Learning the layout made no communicator; asking for one makes it, once.
  EXPECT_EQ(h.communicators_made(), 0);
  const int64_t created = topology::communicators_created();
  int size = 0;
  PMPI_Comm_size(h.node_comm(), &size);
  EXPECT_EQ(h.node_comm(), h.node_comm());
  EXPECT_EQ(topology::communicators_created(), created + 2);  // the duplicate and the node's
  EXPECT_EQ(h.communicators_made(), 2);
  EXPECT_EQ(size, h.node_size);
  const MPI_Comm leaders = h.leaders(), lanes = h.lanes();
  EXPECT_EQ(h.leaders(), leaders);  // made once
  EXPECT_EQ(leaders != MPI_COMM_NULL, h.node_rank == 0);
  if (leaders != MPI_COMM_NULL) {
    int leader_rank = -1;
    PMPI_Comm_size(leaders, &size);
    PMPI_Comm_rank(leaders, &leader_rank);
    EXPECT_EQ(size, h.node_count);
    EXPECT_EQ(leader_rank, h.node_index);  // leaders in node order
  }
  int lane_members = 0;
  for (const auto& m : members) lane_members += static_cast<int>(m.size()) > h.node_rank;
  PMPI_Comm_size(lanes, &size);
  EXPECT_EQ(size, lane_members);
  // The private duplicate has the same ranks but is another communicator.
  int compare = MPI_UNEQUAL;
  PMPI_Comm_compare(h.comm(), parent, &compare);
  EXPECT_EQ(compare, MPI_CONGRUENT);
  EXPECT_EQ(h.parent, parent);
  EXPECT_EQ(topology::communicators_created(), created + 4);
}

TEST(Topology, PretendNodesFromTheEnvironment) {
  const int p = world_size();
  setenv("VENEER_RANKS_PER_NODE", "3,2,3", 1);
  auto h = topology::build_hierarchy(MPI_COMM_WORLD);
  unsetenv("VENEER_RANKS_PER_NODE");
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->pretend);
  std::vector<int> nodes(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) nodes[static_cast<size_t>(r)] = topology::node_of_index(r, {3, 2, 3});
  expect_hierarchy(*h, nodes);
}

TEST(Topology, RealNodesOnOneMachine) {
  auto h = topology::build_hierarchy(MPI_COMM_WORLD);
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->pretend);
  expect_hierarchy(*h, std::vector<int>(static_cast<size_t>(world_size()), 0));
}

// Communicators made after MPI_Init learn their nodes from the keys every
// rank of MPI_COMM_WORLD gave then, without an allgather: a duplicate, a
// split in reverse order and an odd/even split get the nodes of their
// ranks' host names, gathered here by hand.
TEST(Topology, LaterCommunicatorsLearnTheirNodesFromTheWorldsKeys) {
  const int rank = world_rank(), p = world_size();
  for (int kind = 0; kind < 3; ++kind) {
    MPI_Comm comm = MPI_COMM_NULL;
    if (kind == 0) PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (kind == 1) PMPI_Comm_split(MPI_COMM_WORLD, 0, p - rank, &comm);
    if (kind == 2) PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &comm);
    int n = 0;
    PMPI_Comm_size(comm, &n);
    const int64_t mine = topology::host_key();
    std::vector<int64_t> keys(static_cast<size_t>(n));
    ASSERT_EQ(PMPI_Allgather(&mine, 1, MPI_INT64_T, keys.data(), 1, MPI_INT64_T, comm), MPI_SUCCESS);
    std::vector<int> nodes(static_cast<size_t>(n));
    for (size_t r = 0; r < keys.size(); ++r)
      nodes[r] = static_cast<int>(std::find(keys.begin(), keys.end(), keys[r]) - keys.begin());
    {
      auto h = topology::build_hierarchy(comm);
      ASSERT_TRUE(h) << "communicator " << kind;
      EXPECT_FALSE(h->pretend);
      expect_hierarchy(*h, nodes, comm);
    }
    PMPI_Comm_free(&comm);
  }
}

TEST(Topology, InterleavedNodesAreNotConsecutive) {
  const int p = world_size(), rank = world_rank();
  auto h = topology::build_hierarchy(MPI_COMM_WORLD, rank % 2);
  ASSERT_TRUE(h);
  std::vector<int> nodes(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) nodes[static_cast<size_t>(r)] = r % 2;
  expect_hierarchy(*h, nodes);
  if (p >= 3) EXPECT_FALSE(h->node_consecutive);
}

TEST(Topology, SubCommunicatorKeepsWorldNodes) {
  // Pretend nodes are runs of MPI_COMM_WORLD ranks, whatever the communicator.
  const int rank = world_rank();
  MPI_Comm odd_even;
  PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &odd_even);
  setenv("VENEER_RANKS_PER_NODE", "4", 1);
  auto h = topology::build_hierarchy(odd_even);
  unsetenv("VENEER_RANKS_PER_NODE");
  ASSERT_TRUE(h);
  int size = 0;
  PMPI_Comm_size(odd_even, &size);
  std::vector<int> nodes(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) nodes[static_cast<size_t>(r)] = (2 * r + rank % 2) / 4;
  expect_hierarchy(*h, nodes, odd_even);
  h.reset();
  PMPI_Comm_free(&odd_even);
}

TEST(Topology, CachedHierarchyIsFreedWithItsCommunicator) {
  MPI_Comm dup;
  PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const int before = topology::live_hierarchies();
  const Hierarchy* first = topology::hierarchy(dup);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(topology::hierarchy(dup), first);  // cached: no second build
  EXPECT_EQ(topology::live_hierarchies(), before + 1);
  PMPI_Comm_free(&dup);
  EXPECT_EQ(topology::live_hierarchies(), before);
  // A duplicate of a communicator with a hierarchy builds its own.
  PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const Hierarchy* parent = topology::hierarchy(dup);
  MPI_Comm child;
  PMPI_Comm_dup(dup, &child);
  const Hierarchy* own = topology::hierarchy(child);
  EXPECT_NE(own, parent);
  PMPI_Comm_free(&child);
  PMPI_Comm_free(&dup);
  EXPECT_EQ(topology::live_hierarchies(), before);
}

TEST(Topology, NoHierarchyForIntercommunicators) {
  const int p = world_size(), rank = world_rank();
  if (p < 2) GTEST_SKIP() << "needs two groups";
  MPI_Comm half, inter;
  PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  PMPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter);
  int rc = MPI_SUCCESS;
  EXPECT_EQ(topology::build_hierarchy(inter, std::nullopt, &rc), nullptr);
  EXPECT_EQ(rc, MPI_ERR_COMM);
  rc = MPI_SUCCESS;
  EXPECT_EQ(topology::hierarchy(inter, &rc), nullptr);
  EXPECT_EQ(rc, MPI_ERR_COMM);
  PMPI_Comm_free(&inter);
  PMPI_Comm_free(&half);
}

// topology/mpi_error.h: the MPI error code comes back beside every result.
TEST(Topology, ErrorCodesComeBackBesideTheResults) {
  int rc = MPI_SUCCESS;
  EXPECT_EQ(topology::hierarchy(MPI_COMM_NULL, &rc), nullptr);
  EXPECT_EQ(rc, MPI_ERR_COMM);
  MPI_Comm dup;
  PMPI_Comm_dup(MPI_COMM_WORLD, &dup);
  rc = MPI_ERR_OTHER;
  const Hierarchy* h = topology::hierarchy(dup, &rc);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(rc, MPI_SUCCESS);
  for (int round = 0; round < 2; ++round) {  // made, then cached: the same code both times
    rc = MPI_ERR_OTHER;
    EXPECT_NE(h->comm(&rc), MPI_COMM_NULL);
    EXPECT_EQ(rc, MPI_SUCCESS);
    rc = MPI_ERR_OTHER;
    EXPECT_NE(h->node_comm(&rc), MPI_COMM_NULL);
    EXPECT_EQ(rc, MPI_SUCCESS);
    rc = MPI_ERR_OTHER;
    // Not a leader: no communicator, and no error either.
    EXPECT_EQ(h->leaders(&rc) != MPI_COMM_NULL, h->node_rank == 0);
    EXPECT_EQ(rc, MPI_SUCCESS);
    rc = MPI_ERR_OTHER;
    EXPECT_NE(h->lanes(&rc), MPI_COMM_NULL);
    EXPECT_EQ(rc, MPI_SUCCESS);
  }
  EXPECT_EQ(topology::forget_hierarchy(dup), MPI_SUCCESS);
  EXPECT_EQ(topology::forget_hierarchy(dup), MPI_SUCCESS);  // nothing cached any more
  EXPECT_EQ(topology::forget_hierarchy(MPI_COMM_NULL), MPI_SUCCESS);
  PMPI_Comm_free(&dup);
}

}  // namespace
}  // namespace veneer::test
