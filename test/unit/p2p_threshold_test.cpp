// SPDX-License-Identifier: BSD-3-Clause
// The point-to-point take-over threshold from a calibrated table
// (topology::p2p_max_block), the profile's "p2p" section read and written,
// and the thresholds set from a profile unless the user set them. No MPI calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "support/config.h"
#include "topology/profile.h"

namespace veneer::test {
namespace {

namespace topo = veneer::topology;

// A table from `ratios[block class][message size]`: library time / Veneer time,
// Veneer at 10 us, both with `spread`.
std::vector<topo::P2pPoint> table(const std::vector<int64_t>& blocks, const std::vector<std::vector<double>>& ratios,
                                  double spread = 0.02) {
  const std::vector<int64_t> sizes = {4096, 65536, 1 << 20};
  std::vector<topo::P2pPoint> points;
  for (size_t b = 0; b < blocks.size(); ++b)
    for (size_t m = 0; m < ratios[b].size(); ++m) {
      if (ratios[b][m] <= 0) continue;  // not measured
      topo::P2pPoint p;
      p.block = blocks[b];
      p.bytes = sizes[m];
      p.veneer = {1e-5, spread};
      p.library = {1e-5 * ratios[b][m], spread};
      points.push_back(p);
    }
  return points;
}

TEST(P2pThreshold, LargestClassWhereVeneerWinsEverywhere) {
  // Veneer wins clearly up to 64 B, then the library.
  const auto t =
      table({1, 8, 64, 256, 1024}, {{5, 6, 4}, {2, 3, 2}, {1.3, 1.5, 1.2}, {0.8, 0.9, 0.7}, {0.5, 0.6, 0.5}});
  EXPECT_EQ(topo::p2p_max_block(t), 64);
}

TEST(P2pThreshold, PointsInAnyOrder) {
  auto t = table({1, 8, 64, 256}, {{5, 6, 4}, {2, 3, 2}, {1.3, 1.5, 1.2}, {0.8, 0.9, 0.7}});
  std::reverse(t.begin(), t.end());
  EXPECT_EQ(topo::p2p_max_block(t), 64);
}

TEST(P2pThreshold, WinsWithinTheSpreadAreTies) {
  // 1.03x with 2% spread on each side: not beyond the spread, a tie, so 64 B does not pay.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1.03, 1.03, 1.03}})), 8);
  // The same 1.03x with spreads of 0.5%: a win.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1.03, 1.03, 1.03}}, 0.005)), 64);
}

TEST(P2pThreshold, MajorityOfSizesAndNoLoss) {
  // Two wins and a tie: pays.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1.5, 1.5, 1.0}})), 64);
  // One win, two ties: does not pay, but does not stop a larger class that pays.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64, 128}, {{2, 2, 2}, {1.5, 1.0, 1.0}, {1.5, 1.5, 1.5}})), 128);
  // A large loss at one size: the class hurts, and nothing at or above it is taken over.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64, 128}, {{2, 2, 2}, {1.5, 1.5, 0.7}, {1.5, 1.5, 1.5}})), 8);
  // A small loss (Veneer 3% slower, beyond the 1% spreads) at one size of three, wins at the others: pays.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1 / 1.03, 6, 5}}, 0.01)), 64);
  // ...unless the tolerance is tighter, or the loss is larger than 5%.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1 / 1.03, 6, 5}}, 0.01), 0.02), 8);
  EXPECT_EQ(topo::p2p_max_block(table({8, 64}, {{2, 2, 2}, {1 / 1.08, 6, 5}}, 0.01)), 8);
  // Small losses at half the sizes or more: hurts.
  EXPECT_EQ(topo::p2p_max_block(table({8, 64, 128}, {{2, 2, 2}, {0, 1.5, 1 / 1.03}, {2, 2, 2}}, 0.01)), 8);
  // A class measured at one size only (large blocks at small messages are skipped) counts its one size.
  EXPECT_EQ(topo::p2p_max_block(table({8, 4096}, {{2, 2, 2}, {0, 1.5, 0}})), 4096);
}

TEST(P2pThreshold, NothingPaysIsZero) {
  EXPECT_EQ(topo::p2p_max_block(table({1, 8}, {{0.9, 0.9, 0.9}, {0.5, 0.5, 0.5}})), 0);
  EXPECT_EQ(topo::p2p_max_block(table({1, 8}, {{1, 1, 1}, {1, 1, 1}})), 0);  // all ties
  EXPECT_EQ(topo::p2p_max_block({}), 0);
  // The smallest class hurts: nothing is taken over, whatever wins above it.
  EXPECT_EQ(topo::p2p_max_block(table({1, 8}, {{0.5, 0.5, 0.5}, {3, 3, 3}})), 0);
}

TEST(P2pThreshold, TakeOverLevel) {
  topo::P2pProfile p;
  EXPECT_FALSE(p.takeover_max_block());
  p.pack = topo::P2pLevel{256, {}};
  EXPECT_FALSE(p.takeover_max_block());  // packing alone says nothing about sends
  p.intra = topo::P2pLevel{64, {}};
  EXPECT_EQ(p.takeover_max_block(), 64);
  p.inter = topo::P2pLevel{16, {}};
  EXPECT_EQ(p.takeover_max_block(), 16);  // between nodes, where measured
}

topo::Fingerprint here() {
  topo::Fingerprint f;
  f.topology = "00112233aabbccdd";
  f.cpu = "Test CPU";
  f.mpi = "MPICH Version: 4.0";
  f.transport = "ch4:ofi";
  f.veneer = "0.1.0";
  return f;
}

TEST(P2pProfileSection, RoundTrips) {
  topo::Profile p;
  p.fingerprint = here();
  topo::P2pProfile section;
  topo::P2pLevel intra;
  intra.points = table({1, 8, 64}, {{5, 6, 4}, {2, 3, 2}, {0.8, 0.9, 0.7}});
  intra.max_block = topo::p2p_max_block(intra.points);
  section.intra = intra;
  section.pack = topo::P2pLevel{128, table({128}, {{1.2, 1.2, 1.2}})};
  p.p2p = section;
  const topo::ProfileCheck back = topo::profile_from_text(topo::profile_text(p), &p.fingerprint);
  ASSERT_EQ(back.status, topo::ProfileStatus::loaded) << back.why;
  ASSERT_TRUE(back.profile->p2p);
  const topo::P2pProfile& got = *back.profile->p2p;
  ASSERT_TRUE(got.intra);
  EXPECT_FALSE(got.inter);
  ASSERT_TRUE(got.pack);
  EXPECT_EQ(got.intra->max_block, 8);
  EXPECT_EQ(got.pack->max_block, 128);
  ASSERT_EQ(got.intra->points.size(), intra.points.size());
  for (size_t i = 0; i < intra.points.size(); ++i) {
    EXPECT_EQ(got.intra->points[i].block, intra.points[i].block);
    EXPECT_EQ(got.intra->points[i].bytes, intra.points[i].bytes);
    EXPECT_DOUBLE_EQ(got.intra->points[i].library.median, intra.points[i].library.median);
    EXPECT_DOUBLE_EQ(got.intra->points[i].veneer.spread, intra.points[i].veneer.spread);
  }
  EXPECT_EQ(got.takeover_max_block(), 8);
}

TEST(P2pProfileSection, OlderProfilesWithoutItLoad) {
  topo::Profile p;
  p.fingerprint = here();
  const std::string text = topo::profile_text(p);
  ASSERT_EQ(text.find("\"p2p\""), std::string::npos);
  const topo::ProfileCheck back = topo::profile_from_text(text, &p.fingerprint);
  ASSERT_EQ(back.status, topo::ProfileStatus::loaded) << back.why;
  EXPECT_FALSE(back.profile->p2p);
}

TEST(P2pProfileSection, WrongTypesAreCorrupt) {
  topo::Profile p;
  p.fingerprint = here();
  p.p2p = topo::P2pProfile{};
  p.p2p->intra = topo::P2pLevel{8, table({8}, {{2, 2, 2}})};
  const std::string good = topo::profile_text(p);
  for (auto [from, to] : {std::pair<std::string, std::string>{"\"max_block\": 8", "\"max_block\": \"8\""},
                          {"\"max_block\": 8", "\"max_block\": -8"},
                          {"\"block\": 8", "\"block\": 0"},
                          {"\"veneer\": {", "\"veneer\": 3, \"x\": {"},
                          {"\"p2p\": {", "\"p2p\": [], \"y\": {"}}) {
    std::string bad = good;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    const topo::ProfileCheck c = topo::profile_from_text(bad, &p.fingerprint);
    EXPECT_EQ(c.status, topo::ProfileStatus::corrupt) << to;
    EXPECT_NE(c.why.find("p2p"), std::string::npos) << c.why;
  }
}

// set_profile_thresholds works on the process-wide configuration: each test
// puts back what the environment says.
class ProfileThresholds : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("VENEER_P2P_MAX_BLOCK");
    unsetenv("VENEER_ALLTOALL_MAX_BLOCK");
    unsetenv("VENEER_PACK_MAX_BLOCK");
    set_profile_thresholds(std::nullopt, std::nullopt);
    reload_config();
  }
};

TEST_F(ProfileThresholds, PackThresholdIsUnlimitedUntilAProfileOrTheUserSaysOtherwise) {
  unsetenv("VENEER_PACK_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(config().pack_max_block, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::built_in);
  set_profile_thresholds(512, 256, 128);
  EXPECT_EQ(config().pack_max_block, 128);
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::profile);
  reload_config();
  EXPECT_EQ(config().pack_max_block, 128);
  setenv("VENEER_PACK_MAX_BLOCK", "1k", 1);
  reload_config();
  EXPECT_EQ(config().pack_max_block, 1024);
  EXPECT_EQ(origin_name(config().pack_max_block_origin, "VENEER_PACK_MAX_BLOCK"), "VENEER_PACK_MAX_BLOCK");
  unsetenv("VENEER_PACK_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(config().pack_max_block, 128);
  set_profile_thresholds(512, 256);  // a profile without a pack table
  EXPECT_EQ(config().pack_max_block, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::built_in);
}

TEST_F(ProfileThresholds, ProfileReplacesTheDefaultAndNulloptRestoresIt) {
  unsetenv("VENEER_P2P_MAX_BLOCK");
  unsetenv("VENEER_ALLTOALL_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(config().p2p_max_block, VENEER_DEFAULT_P2P_MAX_BLOCK);
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::built_in);
  set_profile_thresholds(512, 256);
  EXPECT_EQ(config().p2p_max_block, 512);
  EXPECT_EQ(config().alltoall_max_block, 256);
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::profile);
  EXPECT_EQ(origin_name(config().p2p_max_block_origin, "VENEER_P2P_MAX_BLOCK"), "profile");
  // Re-reading the environment (tools do, after MPI_Init) keeps the profile's values...
  reload_config();
  EXPECT_EQ(config().p2p_max_block, 512);
  EXPECT_EQ(config().alltoall_max_block_origin, ThresholdOrigin::profile);
  // ...unless the variable is now set, and they come back when it is gone.
  setenv("VENEER_P2P_MAX_BLOCK", "inf", 1);
  reload_config();
  EXPECT_EQ(config().p2p_max_block, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(config().alltoall_max_block, 256);
  unsetenv("VENEER_P2P_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(config().p2p_max_block, 512);
  set_profile_thresholds(0, 0);  // measured: never pays
  EXPECT_EQ(config().p2p_max_block, 0);
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::profile);
  set_profile_thresholds(std::nullopt, std::nullopt);
  EXPECT_EQ(config().p2p_max_block, VENEER_DEFAULT_P2P_MAX_BLOCK);
  EXPECT_EQ(config().alltoall_max_block, VENEER_DEFAULT_ALLTOALL_MAX_BLOCK);
  EXPECT_EQ(config().alltoall_max_block_origin, ThresholdOrigin::built_in);
  EXPECT_EQ(origin_name(config().alltoall_max_block_origin, "VENEER_ALLTOALL_MAX_BLOCK"), "built-in default");
}

TEST_F(ProfileThresholds, TheUsersVariableWins) {
  setenv("VENEER_P2P_MAX_BLOCK", "2k", 1);
  unsetenv("VENEER_ALLTOALL_MAX_BLOCK");
  reload_config();
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::environment);
  set_profile_thresholds(16, 16);
  EXPECT_EQ(config().p2p_max_block, 2048);
  EXPECT_EQ(config().alltoall_max_block, 16);  // only the variable the user set is theirs
  EXPECT_EQ(origin_name(config().p2p_max_block_origin, "VENEER_P2P_MAX_BLOCK"), "VENEER_P2P_MAX_BLOCK");
  set_profile_thresholds(std::nullopt, std::nullopt);
  EXPECT_EQ(config().p2p_max_block, 2048);
  // A value that does not read as a size is ignored, and the profile decides.
  setenv("VENEER_P2P_MAX_BLOCK", "lots", 1);
  reload_config();
  EXPECT_EQ(config().p2p_max_block_origin, ThresholdOrigin::built_in);
  set_profile_thresholds(32, 32);
  EXPECT_EQ(config().p2p_max_block, 32);
}

}  // namespace
}  // namespace veneer::test
