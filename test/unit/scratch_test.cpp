// SPDX-License-Identifier: BSD-3-Clause
// algorithms::Scratch, the collectives' scratch bytes: a block freed by one
// call is the next call's (its pages stay mapped), contents are the caller's,
// and a moved-from Scratch holds nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "algorithms/buffers.h"
#include "support/staging.h"

namespace {

using veneer::algorithms::Scratch;

TEST(Scratch, ALargeBlockIsReusedByTheNextCallOfItsSize) {
  veneer::staging_release_all();
  const int64_t reused_before = veneer::staging_stats().reused;
  const std::byte* first = nullptr;
  {
    Scratch s(size_t{1} << 20);
    ASSERT_NE(s.data(), nullptr);
    ASSERT_EQ(s.size(), size_t{1} << 20);
    std::memset(s.data(), 0x5a, s.size());
    first = s.data();
  }
  Scratch again(size_t{1} << 20);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(veneer::staging_stats().reused, reused_before + 1);
  // A much smaller request does not take a block twice its size.
  Scratch small(size_t{100} << 10);
  EXPECT_NE(small.data(), first);
  veneer::staging_release_all();
}

TEST(Scratch, ResetGivesFreshBytesAndMovesLeaveNothingBehind) {
  Scratch s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.data(), nullptr);
  s.reset(3000);
  ASSERT_EQ(s.size(), 3000u);
  for (size_t i = 0; i < s.size(); ++i) s.data()[i] = static_cast<std::byte>(i);
  Scratch moved(std::move(s));
  EXPECT_TRUE(s.empty());  // NOLINT(bugprone-use-after-move): what a move leaves is the point
  EXPECT_EQ(s.data(), nullptr);
  ASSERT_EQ(moved.size(), 3000u);
  for (size_t i = 0; i < moved.size(); ++i) ASSERT_EQ(moved.data()[i], static_cast<std::byte>(i)) << i;
  moved.reset(0);
  EXPECT_TRUE(moved.empty());
  EXPECT_EQ(moved.data(), nullptr);
}

}  // namespace
