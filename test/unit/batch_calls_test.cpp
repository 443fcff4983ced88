// SPDX-License-Identifier: BSD-3-Clause
// The calls a calibration batch runs (bench/coll_timing.h, batch_calls): a
// rotating root's batch is whole turns of the root over the ranks, so that
// every root is timed as often as every other, however few calls the
// batch's length asks for; other patterns run what they ask for.
#include <gtest/gtest.h>

#include "bench/coll_timing.h"

namespace bench = veneer::bench;

TEST(BatchCalls, ARotatingRootsBatchIsWholeTurnsOfTheRoot) {
  const bench::Pattern rotating{.rotate_root = true};
  for (const int ranks : {1, 2, 3, 4, 7, 16}) {
    for (const int asked : {0, 1, 2, 3, 4, 5, 37, 250}) {
      const int calls = bench::batch_calls(rotating, asked, ranks);
      EXPECT_EQ(calls % ranks, 0) << ranks << " ranks, " << asked << " calls asked";
      EXPECT_GE(calls, std::max(asked, ranks)) << ranks << " ranks, " << asked << " calls asked";
      EXPECT_LT(calls, std::max(asked, 1) + ranks) << ranks << " ranks, " << asked << " calls asked";
    }
  }
  // One large call a batch on 4 ranks: one call from each root.
  EXPECT_EQ(bench::batch_calls(rotating, 1, 4), 4);
  EXPECT_EQ(bench::batch_calls(rotating, 3, 4), 4);
  EXPECT_EQ(bench::batch_calls(rotating, 250, 4), 252);
}

TEST(BatchCalls, OtherPatternsRunTheCallsAskedFor) {
  for (const bench::Pattern p : {bench::Pattern{}, bench::Pattern{.barrier_between = true}}) {
    EXPECT_EQ(bench::batch_calls(p, 1, 4), 1);
    EXPECT_EQ(bench::batch_calls(p, 3, 4), 3);
    EXPECT_EQ(bench::batch_calls(p, 250, 7), 250);
  }
}
