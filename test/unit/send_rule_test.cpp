// SPDX-License-Identifier: BSD-3-Clause
// The typed-send take-over rule from a calibrated profile (support/send_rule.h):
// per peer level and per (block class, message size), taking over only where
// the profile measured Veneer faster beyond the spread; the tables read from
// a profile (algorithms::send_rules_from_profile); and the configuration's
// choice between them, the user's thresholds and the built-in ones. No MPI calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <vector>

#include "algorithms/measured.h"
#include "support/config.h"
#include "topology/profile.h"

namespace veneer::test {
namespace {

namespace topo = veneer::topology;
using Outcome = SendTable::Outcome;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// A table over block classes {1, 8, 64} x sizes {4 KiB, 64 KiB, 1 MiB} from
// a row of outcomes per class ('w' win, 'l' loss, '.' neither).
SendTable grid(const std::vector<const char*>& rows) {
  const std::vector<int64_t> blocks = {1, 8, 64}, sizes = {4096, 65536, 1 << 20};
  SendTable t;
  for (size_t b = 0; b < rows.size(); ++b)
    for (size_t s = 0; s < sizes.size(); ++s)
      t.set(blocks[b], sizes[s], rows[b][s] == 'w' ? Outcome::win : rows[b][s] == 'l' ? Outcome::loss : Outcome::none);
  return t;
}

TEST(SendTable, PointsInAnyOrderMakeOneGrid) {
  SendTable t;
  t.set(64, 65536, Outcome::loss);
  t.set(8, 4096, Outcome::win);
  t.set(8, 65536, Outcome::win);
  t.set(64, 4096, Outcome::none);
  t.set(8, 4096, Outcome::loss);  // a later point replaces the earlier one
  ASSERT_EQ(t.blocks, (std::vector<int64_t>{8, 64}));
  ASSERT_EQ(t.sizes, (std::vector<int64_t>{4096, 65536}));
  EXPECT_EQ(t.at(0, 0), Outcome::loss);
  EXPECT_EQ(t.at(0, 1), Outcome::win);
  EXPECT_EQ(t.at(1, 0), Outcome::none);
  EXPECT_EQ(t.at(1, 1), Outcome::loss);
}

TEST(SendTable, TakesOverWhereTheNearestPointWonAndNoneAroundLost) {
  const SendTable t = grid({"www", "ww.", "lll"});
  // On measured points.
  EXPECT_TRUE(t.takes(8, 4096));
  EXPECT_TRUE(t.takes(1, 1 << 20));
  EXPECT_FALSE(t.takes(8, 1 << 20));  // a tie there
  EXPECT_FALSE(t.takes(64, 65536));   // a loss
  // The 8 KiB 2-D face (8-byte blocks): between 4 KiB and 64 KiB, both won.
  EXPECT_TRUE(t.takes(8, 8192));
  // Between 8- and 64-byte blocks: the 64-byte class lost, so no.
  EXPECT_FALSE(t.takes(10.7, 8192));
  // Between 1 and 8 bytes at 4-64 KiB: all four won.
  EXPECT_TRUE(t.takes(3.5, 30000));
  // Between 64 KiB and 1 MiB at 8-byte blocks: nearer 64 KiB (a win), 1 MiB tied: yes;
  // nearer 1 MiB (the tie): no.
  EXPECT_TRUE(t.takes(8, 100000));
  EXPECT_FALSE(t.takes(8, 700000));
  // A loss on the far side stops it: 20-byte blocks are nearer 8 B (won) than 64 B (lost).
  EXPECT_FALSE(t.takes(20, 4096));
  EXPECT_TRUE(t.takes(2, 65536));                                // 1 B nearest, 8 B won too
  EXPECT_FALSE(grid({"ww.", "www", "lll"}).takes(1.5, 600000));  // nearest (1 B, 1 MiB): a tie
  // Below the smallest size measured: never (per-message costs not measured).
  EXPECT_FALSE(t.takes(1, 2048));
  // Beyond the largest size and class: the largest measured points decide.
  EXPECT_TRUE(t.takes(1, int64_t{8} << 20));
  EXPECT_FALSE(t.takes(4096, 65536));
  EXPECT_TRUE(grid({"www", "www", "www"}).takes(4096, 65536));
}

TEST(SendTable, BoundsHoldEverythingItTakes) {
  const SendTable t = grid({"www", "ww.", "lll"});
  EXPECT_EQ(t.max_block(), 64);  // 8 B won: means up to half-way to 64 B may be taken
  EXPECT_EQ(t.min_bytes(), 4096);
  EXPECT_EQ(grid({"lww", "www", "www"}).max_block(), kNever);  // the largest class won: any block may be taken
  EXPECT_EQ(grid({"lww", "lw.", "..."}).min_bytes(), 4096);    // 64 KiB won: from half-way below it
  const SendTable none = grid({"l..", "...", "lll"});
  EXPECT_EQ(none.max_block(), 0);
  EXPECT_EQ(none.min_bytes(), kNever);
  EXPECT_FALSE(none.takes(1, 1 << 20));
  EXPECT_FALSE(SendTable{}.takes(8, 65536));
  // Exhaustively over a few shapes: whatever is taken lies within the bounds.
  for (double mb : {1.0, 2.0, 8.0, 9.0, 20.0, 22.0, 23.0, 64.0, 100.0, 5000.0})
    for (int64_t bytes : {1024, 4096, 5000, 16000, 17000, 65536, 70000, 300000, 1 << 20, 1 << 24})
      if (t.takes(mb, bytes)) {
        EXPECT_LE(mb, static_cast<double>(t.max_block()));
        EXPECT_GE(bytes, t.min_bytes());
      }
}

TEST(SendTable, TiesFallBackOnTheLevelsBlockThreshold) {
  SendTable t = grid({"www", "...", "..."});
  EXPECT_FALSE(t.takes(8, 32768));  // no threshold for ties: a tie passes
  t.tie_max_block = 8;
  t.tie_min_bytes = 16384;
  EXPECT_TRUE(t.takes(8, 32768));    // nearest (8 B, 64 KiB) a tie, within the threshold
  EXPECT_FALSE(t.takes(8, 8192));    // a tie below the smallest message for ties
  EXPECT_FALSE(t.takes(64, 65536));  // a tie above the block threshold
  EXPECT_TRUE(t.takes(1, 4096));     // wins need neither
  EXPECT_EQ(t.max_block(), 8);
  EXPECT_EQ(t.min_bytes(), 4096);
  // A loss around still stops a tie.
  SendTable lost = grid({"www", "l..", "..."});
  lost.tie_max_block = 8;
  lost.tie_min_bytes = 16384;
  EXPECT_FALSE(lost.takes(8, 32768));
  // Only ties, within the threshold: the bounds come from it.
  SendTable ties = grid({"...", "...", "lll"});
  ties.tie_max_block = 8;
  ties.tie_min_bytes = 16384;
  EXPECT_EQ(ties.max_block(), 8);
  EXPECT_EQ(ties.min_bytes(), 16384);
  for (double mb : {1.0, 8.0, 9.0, 64.0})
    for (int64_t bytes : {4096, 16383, 16384, 65536, 1 << 22})
      if (ties.takes(mb, bytes)) {
        EXPECT_LE(mb, 8.0);
        EXPECT_GE(bytes, 16384);
      }
}

TEST(SendRules, PerPeerLevel) {
  SendRules r;
  r.same_node = grid({"www", "www", "lll"});   // one node: packing pays up to 8 B blocks
  r.other_node = grid({"www", "lll", "lll"});  // between nodes: only byte blocks
  EXPECT_TRUE(r.takes(PeerLevel::same_node, 8, 8192));
  EXPECT_FALSE(r.takes(PeerLevel::other_node, 8, 8192));
  EXPECT_TRUE(r.takes(PeerLevel::other_node, 1, 8192));
  // A level that is not known takes over only where every measured level does.
  EXPECT_FALSE(r.takes(PeerLevel::unknown, 8, 8192));
  EXPECT_TRUE(r.takes(PeerLevel::unknown, 1, 8192));
  EXPECT_EQ(r.max_block(), 64);
  EXPECT_EQ(r.min_bytes(), 4096);
  // One node only (no inter-node table): other-node peers pass through.
  r.other_node.reset();
  EXPECT_FALSE(r.takes(PeerLevel::other_node, 1, 8192));
  EXPECT_TRUE(r.takes(PeerLevel::unknown, 8, 8192));
  EXPECT_FALSE(SendRules{}.takes(PeerLevel::unknown, 1, 8192));
}

// A profile's p2p level from ratios library/Veneer at {1, 8, 64} x {4 KiB, 64 KiB}.
topo::P2pLevel level(const std::vector<std::vector<double>>& ratios, double spread) {
  const std::vector<int64_t> blocks = {1, 8, 64}, sizes = {4096, 65536};
  topo::P2pLevel l;
  for (size_t b = 0; b < ratios.size(); ++b)
    for (size_t s = 0; s < ratios[b].size(); ++s) {
      topo::P2pPoint p;
      p.block = blocks[b];
      p.bytes = sizes[s];
      p.veneer = {1e-5, spread};
      p.library = {1e-5 * ratios[b][s], spread};
      l.points.push_back(p);
    }
  return l;
}

TEST(SendRules, FromAProfileBeyondTheSpread) {
  topo::Profile p;
  EXPECT_TRUE(algorithms::send_rules_from_profile(p).empty());  // no p2p section: no tables
  p.p2p.emplace();
  // Within a node: 1.03x with 2% spreads is a tie, 1.3x a win, 0.7x a loss.
  p.p2p->intra = level({{2, 2}, {1.3, 1.03}, {0.7, 0.7}}, 0.02);
  const SendRules one = algorithms::send_rules_from_profile(p);
  ASSERT_TRUE(one.same_node);
  EXPECT_FALSE(one.other_node);
  EXPECT_EQ(one.same_node->at(1, 0), Outcome::win);
  EXPECT_EQ(one.same_node->at(1, 1), Outcome::none);
  EXPECT_EQ(one.same_node->at(2, 0), Outcome::loss);
  EXPECT_TRUE(one.takes(PeerLevel::same_node, 8, 4096));
  EXPECT_FALSE(one.takes(PeerLevel::same_node, 8, 65536));  // the tie: pass through
  // The same 1.03x with 0.5% spreads: a win.
  p.p2p->inter = level({{2, 2}, {1.3, 1.03}, {0.7, 0.7}}, 0.005);
  const SendRules two = algorithms::send_rules_from_profile(p);
  ASSERT_TRUE(two.other_node);
  EXPECT_TRUE(two.takes(PeerLevel::other_node, 8, 65536));
}

// The configuration picks the tables only from a profile and only where the
// user set neither threshold; the process-wide configuration, restored after each test.
class SendRulesConfig : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("VENEER_P2P_MAX_BLOCK");
    unsetenv("VENEER_P2P_MIN_BYTES");
    set_profile_send_rules(nullptr);
    set_profile_thresholds(std::nullopt, std::nullopt);
    reload_config();
  }
  static std::shared_ptr<const SendRules> rules() {
    SendRules r;
    r.same_node = grid({"www", "www", "..."});
    return std::make_shared<const SendRules>(r);
  }
};

TEST_F(SendRulesConfig, DefaultWithoutAProfile) {
  unsetenv("VENEER_P2P_MAX_BLOCK");
  unsetenv("VENEER_P2P_MIN_BYTES");
  reload_config();
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_max_block, VENEER_DEFAULT_P2P_MAX_BLOCK);
  EXPECT_EQ(config().p2p_min_bytes, VENEER_DEFAULT_P2P_MIN_BYTES);
  EXPECT_EQ(config().p2p_min_bytes_origin, ThresholdOrigin::built_in);
  set_profile_send_rules(std::make_shared<const SendRules>());  // a profile without tables
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_min_bytes, VENEER_DEFAULT_P2P_MIN_BYTES);
}

TEST_F(SendRulesConfig, AProfileInstallsItsTablesAndTheirBounds) {
  set_profile_thresholds(512, 512);  // the single threshold the profile also carries
  set_profile_send_rules(rules());
  ASSERT_NE(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_max_block, 64);  // the tables' bounds, for the fast path
  EXPECT_EQ(config().p2p_min_bytes, 4096);
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::profile);
  EXPECT_EQ(config().p2p_min_bytes_origin, ThresholdOrigin::profile);
  reload_config();  // kept when the environment is read again
  EXPECT_NE(config().send_rules, nullptr);
  set_profile_send_rules(nullptr);  // gone: back to the single threshold
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_max_block, 512);
  EXPECT_EQ(config().p2p_min_bytes, VENEER_DEFAULT_P2P_MIN_BYTES);
}

TEST_F(SendRulesConfig, TheUsersThresholdsWin) {
  set_profile_send_rules(rules());
  setenv("VENEER_P2P_MIN_BYTES", "0", 1);
  reload_config();
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_min_bytes, 0);
  EXPECT_EQ(config().p2p_min_bytes_origin, ThresholdOrigin::environment);
  EXPECT_EQ(config().p2p_max_block, VENEER_DEFAULT_P2P_MAX_BLOCK);
  unsetenv("VENEER_P2P_MIN_BYTES");
  setenv("VENEER_P2P_MAX_BLOCK", "inf", 1);
  reload_config();
  EXPECT_EQ(config().send_rules, nullptr);
  EXPECT_EQ(config().p2p_max_block, kNever);
  EXPECT_EQ(config().p2p_min_bytes, VENEER_DEFAULT_P2P_MIN_BYTES);
  unsetenv("VENEER_P2P_MAX_BLOCK");
  reload_config();
  EXPECT_NE(config().send_rules, nullptr);
}

}  // namespace
}  // namespace veneer::test
