// SPDX-License-Identifier: BSD-3-Clause
// The typed-send take-over rule per peer level, end to end: peer levels of
// MPI_COMM_WORLD, split, duplicated and intercommunicators
// (topology/peer_level.h), and a profile whose send tables say Veneer pays
// within a node and not between nodes, loaded with load_profile: typed sends
// and receives to a peer on the same (pretend) node are taken over, to one on
// the other node passed through, each decision read from Veneer's counters and
// every message's data checked. Then without a profile: the built-in rule,
// which holds in a job on one host.
// Run on 3 ranks with VENEER_RANKS_PER_NODE=2 (ranks 0, 1 on one node, 2 on another).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/measured.h"
#include "support/config.h"
#include "support/counters.h"
#include "topology/peer_level.h"
#include "topology/profile.h"

namespace veneer::test {
namespace {

// Counters count only while a report is wanted; Veneer reads the environment again at MPI_Init, after this.
const bool g_report_on = [] { return setenv("VENEER_REPORT", "1", 1) == 0; }();

namespace alg = veneer::algorithms;
namespace topo = veneer::topology;

int world_rank() {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
// Pretend nodes of two ranks (VENEER_RANKS_PER_NODE=2).
PeerLevel expected_level(int a, int b) { return a / 2 == b / 2 ? PeerLevel::same_node : PeerLevel::other_node; }

// The user's thresholds from the test launcher would replace the tables: unset them here.
class SendRule : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("VENEER_P2P_MAX_BLOCK");
    unsetenv("VENEER_P2P_MIN_BYTES");
    reload_config();
  }
  void TearDown() override {
    setenv("VENEER_PROFILE", "off", 1);  // back to the defaults
    alg::load_profile(MPI_COMM_WORLD);
    unsetenv("VENEER_PROFILE");
    reload_config();
  }
};

TEST_F(SendRule, PeerLevelsOfEveryKindOfCommunicator) {
  const int me = world_rank(), n = world_size();
  topo::forget_world_nodes();
  EXPECT_EQ(topo::peer_level(MPI_COMM_WORLD, 0), PeerLevel::unknown);  // not learnt yet
  ASSERT_TRUE(topo::learn_world_nodes());
  for (int r = 0; r < n; ++r) EXPECT_EQ(topo::peer_level(MPI_COMM_WORLD, r), expected_level(me, r)) << r;
  EXPECT_EQ(topo::peer_level(MPI_COMM_WORLD, MPI_ANY_SOURCE), n > 2 ? PeerLevel::unknown : PeerLevel::same_node);
  EXPECT_EQ(topo::peer_level(MPI_COMM_WORLD, n), PeerLevel::unknown);  // not a rank
  EXPECT_EQ(topo::peer_level(MPI_COMM_SELF, 0), PeerLevel::same_node);

  // Reversed ranks: rank i of `reversed` is world rank n - 1 - i.
  MPI_Comm reversed = MPI_COMM_NULL, dup = MPI_COMM_NULL, node = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &reversed), MPI_SUCCESS);
  for (int i = 0; i < n; ++i) EXPECT_EQ(topo::peer_level(reversed, i), expected_level(me, n - 1 - i)) << i;
  ASSERT_EQ(MPI_Comm_dup(reversed, &dup), MPI_SUCCESS);  // a duplicate builds its own (not copied)
  for (int i = 0; i < n; ++i) EXPECT_EQ(topo::peer_level(dup, i), expected_level(me, n - 1 - i)) << i;
  // One pretend node's ranks: every sender is on this node.
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, me / 2, me, &node), MPI_SUCCESS);
  EXPECT_EQ(topo::peer_level(node, MPI_ANY_SOURCE), PeerLevel::same_node);
  EXPECT_EQ(topo::peer_level(node, 0), PeerLevel::same_node);
  // An intercommunicator between the first node and the rest: every remote rank is on the other node.
  if (n > 2) {
    MPI_Comm inter = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Intercomm_create(node, 0, MPI_COMM_WORLD, me < 2 ? 2 : 0, 7, &inter), MPI_SUCCESS);
    int remote = 0;
    MPI_Comm_remote_size(inter, &remote);
    for (int i = 0; i < remote; ++i) EXPECT_EQ(topo::peer_level(inter, i), PeerLevel::other_node);
    EXPECT_EQ(topo::peer_level(inter, MPI_ANY_SOURCE), PeerLevel::other_node);
    MPI_Comm_free(&inter);
  }
  MPI_Comm_free(&node);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&reversed);

  // Threads asking about a fresh communicator at once (MPI_THREAD_MULTIPLE):
  // one cache is built, and every answer is right.
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided == MPI_THREAD_MULTIPLE) {
    MPI_Comm fresh = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &fresh), MPI_SUCCESS);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int k = 0; k < 200; ++k)
          for (int i = 0; i < n; ++i)
            if (topo::peer_level(fresh, i) != expected_level(me, n - 1 - i)) wrong.fetch_add(1);
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(wrong.load(), 0);
    MPI_Comm_free(&fresh);
  }
  topo::forget_world_nodes();
}

// `elements` doubles in blocks of `block` doubles, one block in every two.
struct Vector {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::vector<double> data;
  int elements = 0;
  Vector(int elements_, int block) : data(static_cast<size_t>(2 * elements_)), elements(elements_) {
    MPI_Type_vector(elements / block, block, 2 * block, MPI_DOUBLE, &type);
    MPI_Type_commit(&type);
  }
  ~Vector() { MPI_Type_free(&type); }
  Vector(const Vector&) = delete;
  Vector& operator=(const Vector&) = delete;
  void fill(double base) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = base + static_cast<double>(i);
  }
};

// Sends `v` from `from` to `to` (typed on both sides; blocking Send and Recv,
// or with `nonblocking` Isend and Irecv); on those two ranks, returns whether
// Veneer took its side over and checks the received elements (the gaps stay
// untouched).
bool moved_by_veneer(Vector& v, int block, int from, int to, bool nonblocking = false) {
  const int me = world_rank();
  bool taken = false;
  if (me == from) {
    v.fill(1000.0);
    const uint64_t before = counters().get(Counter::send_taken);
    if (nonblocking) {
      MPI_Request r = MPI_REQUEST_NULL;
      EXPECT_EQ(MPI_Isend(v.data.data(), 1, v.type, to, 5, MPI_COMM_WORLD, &r), MPI_SUCCESS);
      EXPECT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    } else {
      EXPECT_EQ(MPI_Send(v.data.data(), 1, v.type, to, 5, MPI_COMM_WORLD), MPI_SUCCESS);
    }
    taken = counters().get(Counter::send_taken) > before;
  } else if (me == to) {
    v.fill(-1.0);
    const uint64_t before = counters().get(Counter::recv_taken);
    if (nonblocking) {
      MPI_Request r = MPI_REQUEST_NULL;
      EXPECT_EQ(MPI_Irecv(v.data.data(), 1, v.type, from, 5, MPI_COMM_WORLD, &r), MPI_SUCCESS);
      EXPECT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    } else {
      EXPECT_EQ(MPI_Recv(v.data.data(), 1, v.type, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    }
    taken = counters().get(Counter::recv_taken) > before;
    for (size_t i = 0; i < v.data.size(); ++i) {
      const bool in_block = (i / static_cast<size_t>(block)) % 2 == 0;
      EXPECT_EQ(v.data[i], in_block ? 1000.0 + static_cast<double>(i) : -1.0 + static_cast<double>(i)) << i;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return taken;
}

// A profile of this machine whose send tables say: within a node Veneer wins
// at 8-byte blocks (4 KiB and 64 KiB) and ties at 64-byte blocks; between
// nodes the library wins everywhere.
topo::Profile profile_with_send_tables() {
  topo::Profile p;
  p.fingerprint = topo::current_fingerprint();
  p.created = topo::utc_timestamp();
  auto point = [](int64_t block, int64_t bytes, double library, double veneer) {
    topo::P2pPoint pt;
    pt.block = block;
    pt.bytes = bytes;
    pt.library = {library, 0.02};
    pt.veneer = {veneer, 0.02};
    return pt;
  };
  p.p2p.emplace();
  p.p2p->intra.emplace();
  p.p2p->inter.emplace();
  for (int64_t bytes : {int64_t{4096}, int64_t{65536}}) {
    p.p2p->intra->points.push_back(point(8, bytes, 2e-5, 1e-5));
    p.p2p->intra->points.push_back(point(64, bytes, 1e-5, 1e-5));
    p.p2p->inter->points.push_back(point(8, bytes, 1e-5, 2e-5));
    p.p2p->inter->points.push_back(point(64, bytes, 1e-5, 2e-5));
  }
  p.p2p->intra->max_block = 8;
  return p;
}

// Writes `p` (rank 0), loads it as this job's profile on every rank, removes the file.
alg::ProfileInfo load_as_profile(const topo::Profile& p) {
  char path[256] = {};
  if (world_rank() == 0) {
    std::snprintf(path, sizeof path, "%s/veneer_send_rule_test_%d.json", ::testing::TempDir().c_str(), ::getpid());
    EXPECT_FALSE(topo::write_profile(p, path).has_value());
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  setenv("VENEER_PROFILE", path, 1);
  alg::ProfileInfo info = alg::load_profile(MPI_COMM_WORLD);
  unsetenv("VENEER_PROFILE");
  if (world_rank() == 0) std::remove(path);
  return info;
}

TEST_F(SendRule, TakesOverPerPeerLevelWhereTheProfileMeasuredAGain) {
  const int me = world_rank(), n = world_size();
  const alg::ProfileInfo info = load_as_profile(profile_with_send_tables());
  ASSERT_TRUE(info.loaded()) << info.describe();
  ASSERT_NE(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_min_bytes, 4096);

  Vector face(1024, 1);  // 8 KiB of 8-byte blocks: between the measured sizes, a win at both within a node
  EXPECT_EQ(moved_by_veneer(face, 1, 0, 1), me <= 1);
  EXPECT_EQ(moved_by_veneer(face, 1, 1, 0), me <= 1);
  if (n > 2) EXPECT_FALSE(moved_by_veneer(face, 1, 0, 2));  // the other node: the library, on both sides
  Vector small(256, 1);                                     // 2 KiB: below the smallest measured size
  EXPECT_FALSE(moved_by_veneer(small, 1, 0, 1));
  Vector wide(1024, 8);  // 64-byte blocks: a tie within a node, so the library
  EXPECT_FALSE(moved_by_veneer(wide, 8, 0, 1));
  // Nonblocking calls keep the built-in smallest message (the tables time one
  // blocking message at a time): the 8 KiB face passes, 64 KiB is taken.
  EXPECT_EQ(config().p2p_nonblocking_min_bytes, std::max<int64_t>(4096, VENEER_DEFAULT_P2P_MIN_BYTES));
  EXPECT_FALSE(moved_by_veneer(face, 1, 0, 1, true));
  Vector large(8192, 1);  // 64 KiB of 8-byte blocks: a measured win within a node
  EXPECT_EQ(moved_by_veneer(large, 1, 0, 1, true), me <= 1);
  EXPECT_EQ(moved_by_veneer(large, 1, 1, 0), me <= 1);

  // The user's threshold wins over the tables.
  setenv("VENEER_P2P_MIN_BYTES", "1M", 1);
  reload_config();
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_FALSE(moved_by_veneer(face, 1, 0, 1));
  unsetenv("VENEER_P2P_MIN_BYTES");
  reload_config();
}

// A halo exchange posts many nonblocking calls at once, which the tables (one
// blocking message at a time) do not time: under a profile, Isend and Irecv
// stay within the built-in bounds as well, even where a table says win.
TEST_F(SendRule, NonblockingCallsKeepTheBuiltInBoundsUnderAProfile) {
  const int me = world_rank();
  topo::Profile p = profile_with_send_tables();
  for (int64_t bytes : {int64_t{4096}, int64_t{65536}}) {
    topo::P2pPoint pt;
    pt.block = 512;
    pt.bytes = bytes;
    pt.library = {2e-5, 0.02};
    pt.veneer = {1e-5, 0.02};
    p.p2p->intra->points.push_back(pt);
  }
  p.p2p->intra->points.erase(std::remove_if(p.p2p->intra->points.begin(), p.p2p->intra->points.end(),
                                            [](const topo::P2pPoint& pt) { return pt.block == 64; }),
                             p.p2p->intra->points.end());
  p.p2p->intra->max_block = 512;
  const alg::ProfileInfo info = load_as_profile(p);
  ASSERT_TRUE(info.loaded()) << info.describe();
  ASSERT_NE(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_nonblocking_max_block, std::min<int64_t>(512, VENEER_DEFAULT_P2P_MAX_BLOCK));
  Vector wide(8192, 64);  // 64 KiB of 512-byte blocks: a measured win, blocking, within a node
  EXPECT_EQ(moved_by_veneer(wide, 64, 0, 1), me <= 1);
  EXPECT_FALSE(moved_by_veneer(wide, 64, 0, 1, true));  // above the built-in block: the library
  Vector narrow(8192, 1);                               // 8-byte blocks: within both bounds, taken either way
  EXPECT_EQ(moved_by_veneer(narrow, 1, 0, 1, true), me <= 1);
  EXPECT_EQ(moved_by_veneer(narrow, 1, 0, 1), me <= 1);
  // The user's block threshold speaks for both kinds of call.
  setenv("VENEER_P2P_MAX_BLOCK", "1024", 1);
  reload_config();
  EXPECT_EQ(config().p2p_nonblocking_max_block, 1024);
  unsetenv("VENEER_P2P_MAX_BLOCK");
  reload_config();
  setenv("VENEER_PROFILE", "off", 1);
  alg::load_profile(MPI_COMM_WORLD);
  unsetenv("VENEER_PROFILE");
}

TEST_F(SendRule, BuiltInRuleWithoutAProfile) {
  setenv("VENEER_PROFILE", "off", 1);
  alg::load_profile(MPI_COMM_WORLD);
  unsetenv("VENEER_PROFILE");
  ASSERT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_min_bytes, VENEER_DEFAULT_P2P_MIN_BYTES);
  // 8 KiB is below both libraries' built-in smallest message: passed through at every level.
  Vector face(1024, 1);
  EXPECT_FALSE(moved_by_veneer(face, 1, 0, 1));
  if (world_size() > 2) EXPECT_FALSE(moved_by_veneer(face, 1, 0, 2));
  // 128 KiB of 8-byte blocks: above it, and within both libraries' block
  // threshold: taken over. The built-in rule holds in a job on one host
  // (test/cluster: on several, everything passes), and pretend nodes are one
  // host, so the other pretend node's peer is taken over too.
  EXPECT_TRUE(config().p2p_one_host_only);
  EXPECT_EQ(topo::world_host_count(), 1);
  Vector big(16384, 1);
  EXPECT_EQ(moved_by_veneer(big, 1, 0, 1), world_rank() <= 1);
  EXPECT_EQ(moved_by_veneer(big, 1, 1, 0, true), world_rank() <= 1);
  if (world_size() > 2) {
    EXPECT_EQ(moved_by_veneer(big, 1, 0, 2), world_rank() % 2 == 0);
    EXPECT_EQ(moved_by_veneer(big, 1, 2, 1, true), world_rank() >= 1);
  }

  // Each thread's type cache keeps a type's thresholds (datatypes::detail::Front):
  // a new configuration replaces them for types it has already seen.
  setenv("VENEER_P2P_MIN_BYTES", "0", 1);
  reload_config();
  EXPECT_EQ(moved_by_veneer(face, 1, 0, 1), world_rank() <= 1);
  EXPECT_FALSE(config().p2p_one_host_only);  // a threshold the user sets is the rule in any job
  EXPECT_EQ(moved_by_veneer(face, 1, 0, 1, true), world_rank() <= 1);
  setenv("VENEER_P2P_MAX_BLOCK", "4", 1);  // below the face's 8-byte blocks
  reload_config();
  EXPECT_FALSE(moved_by_veneer(face, 1, 0, 1));
  EXPECT_FALSE(moved_by_veneer(big, 1, 0, 1, true));
  unsetenv("VENEER_P2P_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(moved_by_veneer(face, 1, 0, 1, true), world_rank() <= 1);
  unsetenv("VENEER_P2P_MIN_BYTES");
  reload_config();
  EXPECT_FALSE(moved_by_veneer(face, 1, 0, 1, true));
}

}  // namespace
}  // namespace veneer::test
