// SPDX-License-Identifier: BSD-3-Clause
// support/pool.h, the best-fit pool behind the host staging pool and the
// pinned and device pools: which buffer a request gets, what is kept, the
// bounds, and draining. The buffers are stand-ins (addresses of an array):
// the pool never touches their memory.
#include "support/pool.h"

#include <gtest/gtest.h>

#include <array>

#include "support/staging.h"

namespace {

using veneer::BestFitPool;

std::array<char, 16> g_memory;
char* buffer(int i) { return &g_memory[static_cast<size_t>(i)]; }

TEST(BestFitPool, EmptyPoolServesNothing) {
  BestFitPool<> pool(4, 1 << 20);
  EXPECT_FALSE(pool.take({}, 100).has_value());
  EXPECT_EQ(pool.usage().reused, 0);
  EXPECT_EQ(pool.usage().pooled_buffers, 0);
}

TEST(BestFitPool, TakesTheSmallestThatFits) {
  BestFitPool<> pool(8, 1 << 20);
  ASSERT_TRUE(pool.keep({{}, buffer(0), 4000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(1), 1000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(2), 2000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(3), 500}).empty());
  auto got = pool.take({}, 900);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data, buffer(1));
  EXPECT_EQ(got->capacity, 1000u);
  got = pool.take({}, 1500);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data, buffer(2));
  const veneer::PoolUsage u = pool.usage();
  EXPECT_EQ(u.reused, 2);
  EXPECT_EQ(u.pooled_buffers, 2);
  EXPECT_EQ(u.pooled_bytes, 4500);
}

TEST(BestFitPool, NeverWastesMoreThanHalf) {
  BestFitPool<> pool(8, 1 << 20);
  ASSERT_TRUE(pool.keep({{}, buffer(0), 4000}).empty());
  EXPECT_FALSE(pool.take({}, 1999).has_value());  // 4000 / 2 > 1999
  EXPECT_FALSE(pool.take({}, 4001).has_value());  // too small
  auto got = pool.take({}, 2000);                 // exactly half: taken
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->data, buffer(0));
}

TEST(BestFitPool, ReusesWhatWasKept) {
  BestFitPool<> pool(8, 1 << 20);
  for (int round = 0; round < 5; ++round) {
    auto got = pool.take({}, 3000);
    BestFitPool<>::Buffer b = got ? *got : BestFitPool<>::Buffer{{}, buffer(7), 3000};
    if (!got) pool.allocated();
    EXPECT_EQ(b.data, buffer(7));
    ASSERT_TRUE(pool.keep(b).empty());
  }
  EXPECT_EQ(pool.usage().allocated, 1);
  EXPECT_EQ(pool.usage().reused, 4);
  EXPECT_EQ(pool.usage().pooled_buffers, 1);
}

struct Device {
  int ordinal = 0;
  bool operator==(const Device&) const = default;
};

TEST(BestFitPool, KeysDoNotMix) {
  BestFitPool<Device> pool(8, 1 << 20);
  ASSERT_TRUE(pool.keep({{1}, buffer(0), 1000}).empty());
  EXPECT_FALSE(pool.take({0}, 1000).has_value());
  auto got = pool.take({1}, 1000);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->key.ordinal, 1);
}

TEST(BestFitPool, BoundedByBytesAndCount) {
  BestFitPool<> pool(2, 3000);
  EXPECT_TRUE(pool.keep({{}, buffer(0), 2000}).empty());
  // 3001 bytes would pass the limit: the longest-kept buffer makes room.
  auto out = pool.keep({{}, buffer(1), 1001});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(0));
  EXPECT_TRUE(pool.keep({{}, buffer(2), 1000}).empty());
  // A third buffer: the longest-kept one (buffer 1) goes.
  out = pool.keep({{}, buffer(3), 1});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(1));
  EXPECT_EQ(pool.usage().pooled_bytes, 1001);
  EXPECT_EQ(pool.usage().pooled_buffers, 2);
  EXPECT_EQ(pool.usage().evicted, 2);
  EXPECT_EQ(pool.usage().limit, 3000);
  // One buffer over the limit by itself is refused, and nothing kept goes.
  out = pool.keep({{}, buffer(4), 3001});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(4));
  EXPECT_EQ(pool.usage().pooled_buffers, 2);
  pool.set_limit(0);  // nothing more is kept; what is kept stays
  ASSERT_TRUE(pool.take({}, 1000).has_value());
  out = pool.keep({{}, buffer(2), 1000});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(2));
  EXPECT_EQ(pool.usage().pooled_buffers, 1);
  pool.set_limit(-5);
  EXPECT_EQ(pool.usage().limit, 0);
}

// A pool full of sizes no longer asked for follows the new ones: before,
// it turned every new buffer away, and each call of a collective at a new
// size allocated its scratch afresh (with glibc, mapping and faulting in
// every page again).
TEST(BestFitPool, FollowsTheSizesInUse) {
  BestFitPool<> pool(4, 1 << 20);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.keep({{}, buffer(i), 1000}).empty());
  EXPECT_FALSE(pool.take({}, 5000).has_value());  // none fits
  pool.allocated();
  const auto out = pool.keep({{}, buffer(8), 5000});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(0));  // the longest kept
  for (int round = 0; round < 3; ++round) {
    auto got = pool.take({}, 5000);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->data, buffer(8));
    ASSERT_TRUE(pool.keep(*got).empty());
  }
  EXPECT_EQ(pool.usage().allocated, 1);
  EXPECT_EQ(pool.usage().reused, 3);
}

// The order of return is kept through take(): what came back last goes last.
TEST(BestFitPool, PushesOutInTheOrderBuffersCameBack) {
  BestFitPool<> pool(3, 1 << 20);
  ASSERT_TRUE(pool.keep({{}, buffer(0), 1000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(1), 2000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(2), 3000}).empty());
  auto got = pool.take({}, 2000);  // buffer 1 out and back: now the newest
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(pool.keep(*got).empty());
  auto out = pool.keep({{}, buffer(3), 4000});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(0));
  out = pool.keep({{}, buffer(4), 4000});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, buffer(2));
}

TEST(BestFitPool, DrainHandsEverythingBack) {
  BestFitPool<> pool(8, 1 << 20);
  ASSERT_TRUE(pool.keep({{}, buffer(0), 1000}).empty());
  ASSERT_TRUE(pool.keep({{}, buffer(1), 2000}).empty());
  const auto drained = pool.drain();
  ASSERT_EQ(drained.size(), 2u);
  EXPECT_EQ(drained[0].data, buffer(0));
  EXPECT_EQ(drained[1].data, buffer(1));
  EXPECT_EQ(pool.usage().pooled_bytes, 0);
  EXPECT_EQ(pool.usage().pooled_buffers, 0);
  EXPECT_FALSE(pool.take({}, 1000).has_value());
  EXPECT_TRUE(pool.drain().empty());
}

// The host staging pool over it: large buffers come back, small ones go to
// malloc's own free lists, and release gives everything back.
TEST(StagingPool, ReusesLargeBuffersOnly) {
  veneer::staging_release_all();
  const veneer::StagingStats before = veneer::staging_stats();
  char* first = nullptr;
  {
    veneer::Staging a(size_t{100} << 10);
    ASSERT_NE(a.get(), nullptr);
    first = a.get();
  }
  {
    veneer::Staging b(size_t{90} << 10);  // fits the 100 KiB one without wasting half
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(b.capacity(), size_t{100} << 10);
    veneer::Staging small(100);  // below the pooled sizes
    EXPECT_EQ(small.capacity(), 100u);
  }
  veneer::StagingStats mid = veneer::staging_stats();
  EXPECT_EQ(mid.reused - before.reused, 1);
  EXPECT_EQ(mid.allocated - before.allocated, 1);
  EXPECT_EQ(mid.pooled_buffers, 1);
  EXPECT_EQ(mid.pooled_bytes, int64_t{100} << 10);
  veneer::staging_release_all();
  EXPECT_EQ(veneer::staging_stats().pooled_bytes, 0);
  EXPECT_EQ(veneer::staging_stats().pooled_buffers, 0);
}

}  // namespace
