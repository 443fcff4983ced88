// SPDX-License-Identifier: BSD-3-Clause
// The per-thread table of remembered collective decisions (algorithms/decisions.h):
// call patterns that cycle through a few shapes keep all of them. No MPI calls.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/decisions.h"
#include "algorithms/trial.h"
#include "algorithms/tuning.h"

namespace veneer::test {
namespace {

namespace alg = veneer::algorithms;
using alg::Collective;

alg::DecisionKey bcast_key(int root, int count = 1) {
  return {.comm = MPI_COMM_WORLD, .type = MPI_BYTE, .count = count, .root = root, .collective = Collective::bcast};
}

// Distinct, never dereferenced markers for "an algorithm was chosen".
const alg::Algorithm* marker(size_t i) {
  static const std::vector<alg::Algorithm> markers(64);
  return &markers[i];
}

TEST(Decisions, EveryRootOfABroadcastHasItsOwnSet) {
  // Every root used to share one slot: a rotating root missed on every call.
  std::set<size_t> sets;
  // Up to 64 consecutive roots land in distinct sets, whatever the handles.
  for (int root = 0; root < 64; ++root) sets.insert(alg::detail::set_of(bcast_key(root)));
  EXPECT_EQ(sets.size(), 64u);
}

TEST(Decisions, CollectiveOpAndInPlaceMoveTheSet) {
  const alg::DecisionKey a{.comm = MPI_COMM_WORLD, .type = MPI_DOUBLE, .op = MPI_SUM, .count = 512};
  alg::DecisionKey b = a;
  b.collective = Collective::reduce;
  alg::DecisionKey c = a;
  c.in_place = true;
  alg::DecisionKey d = a;
  d.op = MPI_MAX;
  // The collective and MPI_IN_PLACE move the set whatever the handles
  // (another op moves it as a hash does: not asserted, it depends on them).
  const std::set<size_t> sets{alg::detail::set_of(a), alg::detail::set_of(b), alg::detail::set_of(c)};
  EXPECT_EQ(sets.size(), 3u);
  EXPECT_FALSE(alg::detail::holds(alg::detail::packed(d), alg::detail::packed(a), 0));
}

TEST(Decisions, RotatingRootsAreAllRecalledAfterOneRound) {
  alg::forget_decisions();
  constexpr int kRanks = 8;
  for (int root = 0; root < kRanks; ++root)
    alg::remember_decision(bcast_key(root), {.algorithm = root % 2 ? marker(static_cast<size_t>(root)) : nullptr});
  for (int round = 0; round < 3; ++round)
    for (int root = 0; root < kRanks; ++root) {
      const alg::Remembered* d = alg::recall_decision(bcast_key(root));
      ASSERT_NE(d, nullptr) << "root " << root << ", round " << round;
      EXPECT_EQ(d->algorithm, root % 2 ? marker(static_cast<size_t>(root)) : nullptr) << "root " << root;
    }
}

TEST(Decisions, TwoShapesOfOneSetBothStay) {
  alg::forget_decisions();
  // Two keys that share a set: the second fill keeps the first as its second way.
  const alg::DecisionKey first = bcast_key(0, 7);
  alg::DecisionKey second = first;
  for (int count = 8; count < 1 << 20; ++count) {
    second = bcast_key(0, count);
    if (alg::detail::set_of(second) == alg::detail::set_of(first)) break;
  }
  ASSERT_EQ(alg::detail::set_of(second), alg::detail::set_of(first));
  alg::remember_decision(first, {.algorithm = marker(1)});
  alg::remember_decision(second, {.algorithm = marker(2)});
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(alg::recall_decision(first), nullptr);
    ASSERT_NE(alg::recall_decision(second), nullptr);
    EXPECT_EQ(alg::recall_decision(first)->algorithm, marker(1));
    EXPECT_EQ(alg::recall_decision(second)->algorithm, marker(2));
  }
  // Re-remembering the newest does not push out the other.
  alg::remember_decision(second, {.algorithm = marker(3)});
  ASSERT_NE(alg::recall_decision(first), nullptr);
  EXPECT_EQ(alg::recall_decision(second)->algorithm, marker(3));
}

TEST(Decisions, AChallengerNotTakenHandsThePatternToTheNextOne) {
  // Two challengers on a pattern (algorithms/trial.h): where the first does
  // not take it, the second is tried; where that does not either, the
  // library serves it. The other patterns keep theirs.
  const auto bcasts = alg::algorithms_for(Collective::bcast);
  ASSERT_GE(bcasts.size(), 2u);
  alg::Remembered r{.algorithm = bcasts[0], .collective = Collective::bcast};
  r.varies = alg::Remembered::first_since_barrier;
  r.after_barrier = 2;  // bcasts[1]
  r.on_trial = r.challenged = 0b101;
  r.next_challenger = {2, 0, 1};  // then bcasts[1] on its own pattern, bcasts[0] after a barrier
  r.settle(0, false);
  EXPECT_EQ(r.alternative_for(0), bcasts[1]);
  EXPECT_EQ(r.on_trial, 0b101);
  EXPECT_EQ(r.challenged, 0b101);
  r.settle(0, false);
  EXPECT_EQ(r.alternative_for(0), nullptr);
  EXPECT_EQ(r.on_trial, 0b100);
  EXPECT_EQ(r.alternative_for(2), bcasts[1]);
  // The second taking the pattern: it stays, and nothing is on trial.
  r.settle(2, false);
  EXPECT_EQ(r.alternative_for(2), bcasts[0]);
  r.settle(2, true);
  EXPECT_EQ(r.alternative_for(2), bcasts[0]);
  EXPECT_EQ(r.on_trial, 0);
  EXPECT_EQ(r.challenged, 0);
  // The model's own choice returned to the library: its fallback
  // (Choice::fallback) follows as a challenger to the library, a challenger
  // to a thin lead where the choice was tried for one (the thin bit
  // stays); not taken, the library serves the pattern. Kept, the choice
  // stays and the fallback is dropped. Without one, the library at once.
  for (const bool thin : {false, true}) {
    alg::Remembered own{.algorithm = bcasts[0], .on_trial = 1, .collective = Collective::bcast};
    if (thin) own.challenged = alg::Remembered::thin_bit(0);
    own.next_challenger = {2, 0, 0};
    own.settle(0, false);
    EXPECT_EQ(own.alternative_for(0), bcasts[1]);
    EXPECT_EQ(own.on_trial, 1);
    EXPECT_EQ(own.challenged, thin ? 1 | alg::Remembered::thin_bit(0) : 1);
    EXPECT_EQ(own.incumbent_for(0), nullptr);
    own.settle(0, false);
    EXPECT_EQ(own.alternative_for(0), nullptr);
    EXPECT_EQ(own.on_trial, 0);
    EXPECT_EQ(own.challenged, 0);
  }
  alg::Remembered kept{.algorithm = bcasts[0], .on_trial = 1, .collective = Collective::bcast};
  kept.next_challenger = {2, 0, 0};
  kept.settle(0, true);
  EXPECT_EQ(kept.alternative_for(0), bcasts[0]);
  EXPECT_EQ(kept.on_trial, 0);
  EXPECT_EQ(kept.next_challenger[0], 0);
  alg::Remembered alone{.algorithm = bcasts[0], .on_trial = 1, .collective = Collective::bcast};
  alone.settle(0, false);
  EXPECT_EQ(alone.alternative_for(0), nullptr);
  EXPECT_EQ(alone.on_trial, 0);
}

TEST(Decisions, AChallengerTakenIsTheNextOnesOpponent) {
  // The first challenger taken: the next is tried against it, and where
  // the next is not taken, the first serves the pattern again; where it
  // is, it stays. Either way nothing is on trial after.
  const auto bcasts = alg::algorithms_for(Collective::bcast);
  ASSERT_GE(bcasts.size(), 2u);
  for (const bool second_taken : {false, true}) {
    alg::Remembered r{.algorithm = bcasts[0], .on_trial = 1, .challenged = 1, .collective = Collective::bcast};
    r.next_challenger = {2, 0, 0};  // bcasts[1]
    r.chained = 1;
    EXPECT_EQ(r.incumbent_for(0), nullptr);
    r.settle(0, true);
    EXPECT_EQ(r.alternative_for(0), bcasts[1]);
    EXPECT_EQ(r.incumbent_for(0), bcasts[0]);
    EXPECT_EQ(r.on_trial, 1);
    EXPECT_EQ(r.challenged, 1);
    r.settle(0, second_taken);
    EXPECT_EQ(r.alternative_for(0), second_taken ? bcasts[1] : bcasts[0]) << second_taken;
    EXPECT_EQ(r.incumbent_for(0), nullptr);
    EXPECT_EQ(r.on_trial, 0);
    EXPECT_EQ(r.challenged, 0);
  }
  // On a root that moved, the same with the alternatives' indices.
  alg::Remembered moved{.algorithm = nullptr, .collective = Collective::bcast};
  moved.varies = alg::Remembered::moved_root;
  moved.moving = 2;  // bcasts[1]
  moved.on_trial = moved.challenged = 0b10;
  moved.next_challenger = {0, 1, 0};  // then bcasts[0]
  moved.chained = 0b10;
  moved.settle(1, true);
  EXPECT_EQ(moved.alternative_for(1), bcasts[0]);
  EXPECT_EQ(moved.incumbent_for(1), bcasts[1]);
  moved.settle(1, false);
  EXPECT_EQ(moved.alternative_for(1), bcasts[1]);
  EXPECT_EQ(moved.alternative_for(0), nullptr);
  EXPECT_EQ(moved.on_trial, 0);
  // Not chained: the first taken stays, and no other is tried.
  alg::Remembered alone{.algorithm = bcasts[0], .on_trial = 1, .challenged = 1, .collective = Collective::bcast};
  alone.next_challenger = {2, 0, 0};
  alone.settle(0, true);
  EXPECT_EQ(alone.alternative_for(0), bcasts[0]);
  EXPECT_EQ(alone.on_trial, 0);
  EXPECT_EQ(alone.next_challenger[0], 0);
}

TEST(Decisions, TheFormulasBestIsTriedLastAgainstTheLibraryOrTheOneTaken) {
  // A queue of two behind the first challenger: the next (not chained: only
  // where the first is not taken), then the formulas' best (always).
  const auto allreduces = alg::algorithms_for(Collective::allreduce);
  ASSERT_GE(allreduces.size(), 3u);
  auto queued = [&] {
    alg::Remembered r{.algorithm = allreduces[0], .on_trial = 1, .challenged = 1, .collective = Collective::allreduce};
    r.next_challenger = {static_cast<uint8_t>(2 | 3 << 4), 0, 0};  // allreduces[1], then allreduces[2]
    return r;
  };
  // The first not taken: the next against the library, then the formulas'
  // best against the library (the next not taken) or against the next.
  for (const bool next_taken : {false, true}) {
    alg::Remembered r = queued();
    r.settle(0, false);
    EXPECT_EQ(r.alternative_for(0), allreduces[1]);
    EXPECT_EQ(r.incumbent_for(0), nullptr);
    r.settle(0, next_taken);
    EXPECT_EQ(r.alternative_for(0), allreduces[2]);
    EXPECT_EQ(r.incumbent_for(0), next_taken ? allreduces[1] : nullptr);
    r.settle(0, false);
    EXPECT_EQ(r.alternative_for(0), next_taken ? allreduces[1] : nullptr) << next_taken;
    EXPECT_EQ(r.on_trial, 0);
  }
  // The first taken: the next, not chained, is passed over; the formulas'
  // best is tried against the first, and takes the pattern by leading it.
  alg::Remembered r = queued();
  r.settle(0, true);
  EXPECT_EQ(r.alternative_for(0), allreduces[2]);
  EXPECT_EQ(r.incumbent_for(0), allreduces[0]);
  r.settle(0, true);
  EXPECT_EQ(r.alternative_for(0), allreduces[2]);
  EXPECT_EQ(r.on_trial, 0);
  EXPECT_EQ(r.challenged, 0);
  EXPECT_EQ(r.chained, 0);
}

// A challenger must win three in four of its block pairs, rounded up:
// both of two, all of three, six of eight.
TEST(Decisions, AChallengerWinsThreeInFourOfItsPairs) {
  const std::vector<size_t> needed{0, 1, 2, 3, 3, 4, 5, 6, 6};
  for (size_t pairs = 0; pairs < needed.size(); ++pairs) EXPECT_EQ(alg::pairs_to_win(pairs), needed[pairs]) << pairs;
}

// The interposer's quick path (library_answers) answers only what was
// marked for it (answer_quickly): a library decision with nothing to note,
// marked while the caller's conditions held, until the epoch moves.
TEST(Decisions, OnlyAMarkedLibraryDecisionIsAnsweredQuickly) {
  alg::forget_decisions();
  const alg::DecisionKey library = bcast_key(1, 64), chosen = bcast_key(2, 64), varies = bcast_key(3, 64);
  alg::remember_decision(library, {});
  alg::remember_decision(chosen, {.algorithm = marker(7)});
  alg::Remembered moved{.collective = Collective::bcast};
  moved.varies = alg::Remembered::moved_root;
  moved.moving = 1;
  alg::remember_decision(varies, moved);
  // Remembered, not yet marked.
  for (const auto& key : {library, chosen, varies}) {
    EXPECT_NE(alg::recall_decision(key), nullptr);
    EXPECT_FALSE(alg::library_answers(key));
  }
  // Not marked where the caller's conditions do not hold (a report wanted, device memory possible).
  alg::answer_quickly(library, [] { return false; });
  EXPECT_FALSE(alg::library_answers(library));
  for (const auto& key : {library, chosen, varies}) alg::answer_quickly(key, [] { return true; });
  EXPECT_TRUE(alg::library_answers(library));
  EXPECT_FALSE(alg::library_answers(chosen)) << "an algorithm is chosen";
  EXPECT_FALSE(alg::library_answers(varies)) << "a moved root is noted and may choose otherwise";
  // The mark changes nothing the full path reads.
  ASSERT_NE(alg::recall_decision(library), nullptr);
  EXPECT_EQ(alg::recall_decision(library)->algorithm, nullptr);
  EXPECT_EQ(alg::recall_decision(chosen)->algorithm, marker(7));
  // Another count, root or collective is another call.
  EXPECT_FALSE(alg::library_answers(bcast_key(1, 65)));
  EXPECT_FALSE(alg::library_answers(bcast_key(0, 64)));
  alg::DecisionKey reduce = library;
  reduce.collective = Collective::reduce;
  EXPECT_FALSE(alg::library_answers(reduce));
  // Remembered again (a new decision): unmarked until marked again.
  alg::remember_decision(library, {});
  EXPECT_FALSE(alg::library_answers(library));
  alg::answer_quickly(library, [] { return true; });
  EXPECT_TRUE(alg::library_answers(library));
  // Anything that moves the epoch (a freed communicator or type, the
  // configuration read again, the device byte) ends the mark.
  alg::forget_decisions();
  EXPECT_FALSE(alg::library_answers(library));
  EXPECT_EQ(alg::recall_decision(library), nullptr);
}

// The table's key keeps every field a collective has: two calls that differ
// in any one of them are never taken for each other.
TEST(Decisions, EveryFieldOfACallTellsItApart) {
  alg::forget_decisions();
  const alg::DecisionKey base{.comm = MPI_COMM_WORLD,
                              .type = MPI_DOUBLE,
                              .op = MPI_SUM,
                              .count = 512,
                              .root = 1,
                              .collective = Collective::reduce};
  const alg::DecisionKey exchange{.comm = MPI_COMM_WORLD,
                                  .type = MPI_DOUBLE,
                                  .stype = MPI_INT,
                                  .count = 8,
                                  .scount = 16,
                                  .collective = Collective::allgather};
  std::vector<alg::DecisionKey> keys{base, exchange};
  auto vary = [&](alg::DecisionKey k, auto change) {
    change(k);
    keys.push_back(k);
  };
  vary(base, [](auto& k) { k.comm = MPI_COMM_SELF; });
  vary(base, [](auto& k) { k.type = MPI_FLOAT; });
  vary(base, [](auto& k) { k.op = MPI_MAX; });
  vary(base, [](auto& k) { k.count = 513; });
  vary(base, [](auto& k) { k.root = 2; });
  vary(base, [](auto& k) { k.in_place = true; });
  vary(base, [](auto& k) { k.collective = Collective::allreduce; });
  vary(exchange, [](auto& k) { k.stype = MPI_FLOAT; });
  vary(exchange, [](auto& k) { k.scount = 17; });
  vary(exchange, [](auto& k) { k.collective = Collective::alltoall; });
  for (size_t i = 0; i < keys.size(); ++i) alg::remember_decision(keys[i], {.algorithm = marker(10 + i)});
  for (size_t i = 0; i < keys.size(); ++i) {
    const alg::Remembered* d = alg::recall_decision(keys[i]);
    // A key may have been pushed out by two later fills of its set; never answered for another.
    if (d) {
      EXPECT_EQ(d->algorithm, marker(10 + i)) << "key " << i;
    }
  }
  EXPECT_NE(alg::recall_decision(keys.back()), nullptr);
}

// Counts of 16 and up are decided by buckets 1/8 octave wide: the count
// with all but its four leading bits cleared, never above the count and
// within 1/8 of it, 8 buckets per doubling; smaller counts alone.
TEST(Decisions, CountsAreDecidedByBucketsAnEighthOfAnOctaveWide) {
  for (int n = 0; n < 16; ++n) EXPECT_EQ(alg::decision_count(n), n);
  EXPECT_EQ(alg::decision_count(17), 16);
  EXPECT_EQ(alg::decision_count(31), 30);
  EXPECT_EQ(alg::decision_count(143), 128);
  EXPECT_EQ(alg::decision_count(144), 144);
  EXPECT_EQ(alg::decision_count(1000), 960);
  EXPECT_EQ(alg::decision_count(INT_MAX), 0x78000000);
  std::set<int> per_doubling;
  for (int n = 16; n < (1 << 20); ++n) {
    const int b = alg::decision_count(n);
    ASSERT_LE(b, n);
    ASSERT_LT(n - b, b / 8 + 1) << n;
    ASSERT_EQ(alg::decision_count(b), b);
    if (n >= 4096 && n < 8192) per_doubling.insert(b);
  }
  EXPECT_EQ(per_doubling.size(), 8u);
}

// Which collectives' counts are bucketed: those whose rules, built-in and
// the user's, hold for every size; never reduce_scatter (remembered by its
// total). A rule with a size boundary keeps its collective's counts exact.
TEST(Decisions, OnlyCollectivesWithoutASizeBoundaryAreBucketed) {
  const uint32_t before = alg::detail::g_count_buckets.load();
  alg::Tuning t;
  for (int i = 0; i < alg::collective_count; ++i)
    t.defaults[i] = *alg::parse_rules(static_cast<Collective>(i), alg::default_rules(static_cast<Collective>(i)));
  alg::count_buckets_for(t);
  EXPECT_TRUE(alg::counts_bucketed(Collective::allreduce));
  EXPECT_TRUE(alg::counts_bucketed(Collective::bcast));
  EXPECT_TRUE(alg::counts_bucketed(Collective::reduce));
  EXPECT_TRUE(alg::counts_bucketed(Collective::allgather));
  EXPECT_TRUE(alg::counts_bucketed(Collective::reduce_scatter_block));
  EXPECT_FALSE(alg::counts_bucketed(Collective::reduce_scatter));
  EXPECT_FALSE(alg::counts_bucketed(Collective::alltoall));  // built in: 64k-inf offers three only
  const alg::DecisionKey k = alg::decision_key(
      {.collective = Collective::allreduce, .count = 143, .type = MPI_DOUBLE, .op = MPI_SUM}, MPI_COMM_WORLD);
  EXPECT_EQ(k.count, 128);
  t.user[static_cast<int>(Collective::allreduce)] = *alg::parse_rules(Collective::allreduce, "0-1k:ring");
  t.user[static_cast<int>(Collective::bcast)] = *alg::parse_rules(Collective::bcast, "0-inf:binomial");
  alg::count_buckets_for(t);
  EXPECT_FALSE(alg::counts_bucketed(Collective::allreduce));
  EXPECT_TRUE(alg::counts_bucketed(Collective::bcast));
  EXPECT_EQ(alg::decision_key({.collective = Collective::allreduce, .count = 143, .type = MPI_DOUBLE, .op = MPI_SUM},
                              MPI_COMM_WORLD)
                .count,
            143);
  alg::detail::g_count_buckets.store(before);
}

TEST(Decisions, ForgettingDropsEverything) {
  alg::remember_decision(bcast_key(3), {.algorithm = marker(5)});
  ASSERT_NE(alg::recall_decision(bcast_key(3)), nullptr);
  alg::forget_decisions();
  EXPECT_EQ(alg::recall_decision(bcast_key(3)), nullptr);
}

}  // namespace
}  // namespace veneer::test
