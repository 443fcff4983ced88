// SPDX-License-Identifier: BSD-3-Clause
// The tuning language, the selector and the public entry points: forced
// choices through the environment, pass-through of what Veneer does not take,
// explain and the report.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "algorithms/collectives.h"
#include "algorithms/decisions.h"
#include "algorithms/select.h"
#include "algorithms/tuning.h"
#include "datatypes/cache.h"
#include "test/collectives/harness.h"

namespace veneer::test {
namespace {

// The per-algorithm counts are kept only while a report is wanted; Veneer
// reads the environment again at MPI_Init, which runs after this.
const bool g_report_on = [] { return setenv("VENEER_REPORT", "1", 1) == 0; }();

namespace alg = veneer::algorithms;

TEST(Tuning, ParsesRules) {
  std::string error;
  auto rules =
      alg::parse_rules(Collective::allreduce, "0-4k:recursive_doubling, 4k-1M:ring|rabenseifner,1M-inf:auto", &error);
  ASSERT_TRUE(rules) << error;
  ASSERT_EQ(rules->size(), 3u);
  EXPECT_EQ((*rules)[0].lo, 0);
  EXPECT_EQ((*rules)[0].hi, 4096);
  EXPECT_EQ((*rules)[0].choices, (std::vector<std::string>{"recursive_doubling"}));
  EXPECT_EQ((*rules)[1].choices, (std::vector<std::string>{"ring", "rabenseifner"}));
  EXPECT_TRUE((*rules)[2].choices.empty());  // auto
  EXPECT_TRUE((*rules)[0].covers(4095));
  EXPECT_FALSE((*rules)[0].covers(4096));
  EXPECT_TRUE((*rules)[1].covers(4096));
  EXPECT_TRUE((*rules)[2].covers(std::numeric_limits<int64_t>::max()));
  auto forced = alg::parse_rules(Collective::alltoall, "0-inf:library");
  ASSERT_TRUE(forced);
  EXPECT_EQ((*forced)[0].choices, (std::vector<std::string>{"library"}));
  EXPECT_TRUE(alg::parse_rules(Collective::bcast, ""));
}

// A bare choice means the whole size range, as the README's examples write it.
TEST(Tuning, BareChoiceCoversEverySize) {
  for (const char* text : {"ring", "auto", "library", "ring|rabenseifner", " two_level "}) {
    std::string error;
    auto rules = alg::parse_rules(Collective::allreduce, text, &error);
    ASSERT_TRUE(rules) << text << ": " << error;
    ASSERT_EQ(rules->size(), 1u) << text;
    EXPECT_EQ((*rules)[0].lo, 0) << text;
    EXPECT_TRUE((*rules)[0].covers(std::numeric_limits<int64_t>::max())) << text;
  }
  auto ring = alg::parse_rules(Collective::allreduce, "ring");
  EXPECT_EQ((*ring)[0].choices, (std::vector<std::string>{"ring"}));
  EXPECT_TRUE((*alg::parse_rules(Collective::allreduce, "auto"))[0].choices.empty());
  auto mixed = alg::parse_rules(Collective::allreduce, "0-4k:recursive_doubling,ring");
  ASSERT_TRUE(mixed);
  EXPECT_EQ((*mixed)[1].choices, (std::vector<std::string>{"ring"}));
}

TEST(Tuning, RejectsJunk) {
  for (const char* junk :
       {"0-4k", "4k-0:ring", "0-4k:nonexistent", "0-x:ring", "0-4k:ring,", "0-4k:ring|", "0:ring", "0-4k:lanes"}) {
    std::string error;
    // lanes is an allreduce algorithm, not a bcast one.
    EXPECT_FALSE(alg::parse_rules(Collective::bcast, junk, &error)) << junk;
    EXPECT_FALSE(error.empty()) << junk;
  }
}

TEST(Tuning, DefaultsAreWrittenInTheSameLanguage) {
  for (int i = 0; i < alg::collective_count; ++i) {
    const auto c = static_cast<Collective>(i);
    std::string error;
    auto rules = alg::parse_rules(c, alg::default_rules(c), &error);
    ASSERT_TRUE(rules) << alg::collective_name(c) << ": " << error;
    EXPECT_FALSE(rules->empty());
    // Every size is covered.
    for (int64_t bytes : {int64_t{0}, int64_t{1} << 20, std::numeric_limits<int64_t>::max()}) {
      bool covered = false;
      for (const auto& r : *rules) covered = covered || r.covers(bytes);
      EXPECT_TRUE(covered) << alg::collective_name(c) << " " << bytes;
    }
  }
}

alg::Shape many_nodes(int64_t bytes, bool consecutive) {
  alg::Shape s;
  s.collective = Collective::allreduce;
  s.bytes = bytes;
  s.count = bytes / 8;
  s.ranks = 64;
  s.nodes = 8;
  s.min_ranks_per_node = s.max_ranks_per_node = 8;
  s.node_consecutive = consecutive;
  return s;
}

alg::Tuning with_rules(Collective c, const char* text) {
  alg::Tuning t;
  t.user[static_cast<int>(c)] = *alg::parse_rules(c, text);
  t.defaults[static_cast<int>(c)] = *alg::parse_rules(c, alg::default_rules(c));
  return t;
}

TEST(Selection, ForcedChoicesAndTheirLimits) {
  const auto& m = alg::default_cost_model();
  alg::Shape s = many_nodes(4096, true);
  auto ring = alg::choose(s, with_rules(Collective::allreduce, "0-inf:ring"), m);
  ASSERT_NE(ring.algorithm, nullptr);
  EXPECT_EQ(ring.algorithm->name, "ring");
  // Ring needs a commutative op: forced anyway, it falls back to the library.
  s.commutative = false;
  // (A Choice points into its Tuning's rules: keep the Tuning alive while reading its reason.)
  const alg::Tuning ring_only = with_rules(Collective::allreduce, "0-inf:ring");
  auto refused = alg::choose(s, ring_only, m);
  EXPECT_EQ(refused.algorithm, nullptr);
  EXPECT_NE(alg::reason(refused, s).find("commutative"), std::string::npos) << alg::reason(refused, s);
  // Lanes needs equal nodes.
  s = many_nodes(4096, true);
  s.equal_ranks_per_node = false;
  s.min_ranks_per_node = 7;
  EXPECT_EQ(alg::choose(s, with_rules(Collective::allreduce, "0-inf:lanes"), m).algorithm, nullptr);
  // Rules cover sizes: outside 0-4k the defaults apply.
  s = many_nodes(1 << 20, true);
  const alg::Tuning small_ring = with_rules(Collective::allreduce, "0-4k:ring");
  auto outside = alg::choose(s, small_ring, m);
  EXPECT_EQ(alg::reason(outside, s).find("VENEER_ALLREDUCE"), std::string::npos) << alg::reason(outside, s);
  EXPECT_EQ(alg::choose(s, with_rules(Collective::allreduce, "0-inf:library"), m).algorithm, nullptr);
}

TEST(Selection, PicksTheCheapestAndRespectsTheLibraryMargin) {
  alg::CostModel m;
  for (int64_t bytes : {int64_t{8}, int64_t{64} << 10, int64_t{16} << 20}) {
    for (bool consecutive : {true, false}) {
      alg::Shape s = many_nodes(bytes, consecutive);
      // Among a list without the library: the least predicted.
      auto c = alg::choose(s, with_rules(Collective::allreduce, "0-inf:recursive_doubling|ring|two_level"), m);
      ASSERT_NE(c.algorithm, nullptr);
      for (const char* name : {"recursive_doubling", "ring", "two_level"})
        EXPECT_LE(c.predicted_seconds, alg::find_algorithm(Collective::allreduce, name)->predicted_seconds(s, m));
      // With the library: an algorithm only when clearly below its estimate.
      auto a = alg::choose(s, alg::Tuning{}, m);
      if (a.algorithm) EXPECT_LT(a.predicted_seconds, m.library_margin * a.library_seconds);
      else
        for (const auto* algo : alg::algorithms_for(Collective::allreduce))
          if (alg::eligible(*algo, s))
            EXPECT_GE(algo->predicted_seconds(s, m), m.library_margin * a.library_seconds) << algo->name;
    }
  }
  // Hierarchy pays across many nodes when flat steps all cross the network.
  auto far = alg::choose(many_nodes(8, false), alg::Tuning{}, m);
  ASSERT_NE(far.algorithm, nullptr) << alg::reason(far, many_nodes(8, false));
  EXPECT_TRUE(far.algorithm->hierarchical) << far.algorithm->name;
  // One node: the library's own algorithms are as good as ours; it keeps the call.
  alg::Shape one = many_nodes(1 << 20, true);
  one.nodes = 1;
  one.max_ranks_per_node = one.min_ranks_per_node = 64;
  EXPECT_EQ(alg::choose(one, alg::Tuning{}, m).algorithm, nullptr);
}

TEST(Selection, ExplainListsEveryAlgorithm) {
  std::string text = alg::explain(Collective::allreduce, 1 << 20, MPI_COMM_WORLD);
  for (const auto* a : alg::algorithms_for(Collective::allreduce))
    EXPECT_NE(text.find(std::string(a->name)), std::string::npos) << text;
  EXPECT_NE(text.find("library"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen: "), std::string::npos) << text;
  std::string shape = alg::describe(many_nodes(8, false));
  EXPECT_NE(shape.find("8 nodes"), std::string::npos) << shape;
}

// Sets one environment variable for a scope and re-reads the rules.
struct Override {
  std::string name;
  Override(const char* n, const char* value) : name(n) {
    setenv(n, value, 1);
    alg::collectives_init();
  }
  ~Override() {
    unsetenv(name.c_str());
    alg::collectives_init();
  }
};

uint64_t calls(Collective c, std::string_view algorithm) {
  for (const auto& e : alg::collectives_counts())
    if (e.collective == c && e.algorithm == algorithm) return e.calls;
  return 0;
}

TEST(PublicApi, ForcedThroughTheEnvironment) {
  const int p = world_size(), rank = world_rank();
  std::vector<int> in(100), out(100, -1), reference(100);
  for (int i = 0; i < 100; ++i) in[static_cast<size_t>(i)] = rank * 1000 + i;
  PMPI_Allreduce(in.data(), reference.data(), 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  alg::reset_collectives_counts();
  {
    Override o("VENEER_ALLREDUCE", "0-256:recursive_doubling,256-inf:ring");
    auto rc = alg::allreduce(in.data(), out.data(), 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD);  // 400 bytes
    if (p == 1) {
      EXPECT_FALSE(rc);  // one rank: nothing to gain, the library keeps it
      EXPECT_EQ(calls(Collective::allreduce, "library"), 1u);
    } else {
      ASSERT_TRUE(rc);
      EXPECT_EQ(*rc, MPI_SUCCESS);
      EXPECT_EQ(out, reference);
      EXPECT_EQ(calls(Collective::allreduce, "ring"), 1u);
      rc = alg::allreduce(in.data(), out.data(), 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);  // 40 bytes
      ASSERT_TRUE(rc);
      EXPECT_EQ(calls(Collective::allreduce, "recursive_doubling"), 1u);
      std::string report = alg::collectives_report();
      EXPECT_NE(report.find("allreduce: recursive_doubling 1, ring 1"), std::string::npos) << report;
    }
  }
  {
    Override o("VENEER_ALLREDUCE", "0-inf:library");
    EXPECT_FALSE(alg::allreduce(in.data(), out.data(), 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  }
  {
    // Not eligible (non-commutative op): forced or not, the library runs it.
    Override o("VENEER_ALLREDUCE", "0-inf:ring");
    std::vector<unsigned> affine_in(8, 3u), affine_out(8);
    MPI_Datatype pair;
    PMPI_Type_contiguous(2, MPI_UNSIGNED, &pair);
    PMPI_Type_commit(&pair);
    EXPECT_FALSE(alg::allreduce(affine_in.data(), affine_out.data(), 4, pair, affine_op(), MPI_COMM_WORLD));
    PMPI_Type_free(&pair);
  }
  {
    // A broken override is ignored with a warning, not obeyed in part.
    Override o("VENEER_ALLREDUCE", "0-4k:ring,junk");
    alg::reset_collectives_counts();
    alg::allreduce(in.data(), out.data(), 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(calls(Collective::allreduce, "ring"), 0u);
  }
}

TEST(PublicApi, EveryCollectiveThroughItsEntryPoint) {
  const int p = world_size(), rank = world_rank();
  if (p == 1) GTEST_SKIP() << "one rank passes through";
  Override a("VENEER_BCAST", "0-inf:scatter_allgather");
  Override b("VENEER_REDUCE", "0-inf:two_level");
  Override c("VENEER_ALLGATHER", "0-inf:bruck");
  Override d("VENEER_REDUCE_SCATTER", "0-inf:pairwise");
  Override e("VENEER_ALLTOALL", "0-inf:pairwise");
  alg::reset_collectives_counts();
  const int n = 6;
  std::vector<int> in(static_cast<size_t>(n * p)), out(static_cast<size_t>(n * p)), ref(static_cast<size_t>(n * p));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i) * 7 + rank;
  auto reset = [&] { std::fill(out.begin(), out.end(), -1), std::fill(ref.begin(), ref.end(), -1); };

  reset();
  out = in;
  ref = in;
  ASSERT_EQ(alg::bcast(out.data(), n, MPI_INT, p - 1, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Bcast(ref.data(), n, MPI_INT, p - 1, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  reset();
  ASSERT_EQ(alg::reduce(in.data(), out.data(), n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Reduce(in.data(), ref.data(), n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  reset();
  ASSERT_EQ(alg::allgather(in.data(), n, MPI_INT, out.data(), n, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Allgather(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  reset();
  std::vector<int> counts(static_cast<size_t>(p), n);
  ASSERT_EQ(alg::reduce_scatter(in.data(), out.data(), counts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Reduce_scatter(in.data(), ref.data(), counts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  reset();
  ASSERT_EQ(alg::reduce_scatter_block(in.data(), out.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Reduce_scatter_block(in.data(), ref.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  reset();
  ASSERT_EQ(alg::alltoall(in.data(), n, MPI_INT, out.data(), n, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  PMPI_Alltoall(in.data(), n, MPI_INT, ref.data(), n, MPI_INT, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);

  EXPECT_EQ(calls(Collective::bcast, "scatter_allgather"), 1u);
  EXPECT_EQ(calls(Collective::reduce, "two_level"), 1u);
  EXPECT_EQ(calls(Collective::allgather, "bruck"), 1u);
  EXPECT_EQ(calls(Collective::reduce_scatter, "pairwise"), 1u);
  EXPECT_EQ(calls(Collective::reduce_scatter_block, "pairwise"), 1u);  // follows VENEER_REDUCE_SCATTER
  EXPECT_EQ(calls(Collective::alltoall, "pairwise"), 1u);
}

TEST(PublicApi, PretendNodesThroughTheEnvironment) {
  const int p = world_size(), rank = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  setenv("VENEER_RANKS_PER_NODE", "2", 1);
  Override o("VENEER_ALLREDUCE", "0-inf:lanes");
  MPI_Comm comm;  // a new communicator builds its hierarchy from the environment
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  alg::reset_collectives_counts();
  std::vector<double> in(33), out(33), ref(33);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.25 * static_cast<double>(i) + rank;
  auto rc = alg::allreduce(in.data(), out.data(), 33, MPI_DOUBLE, MPI_SUM, comm);
  unsetenv("VENEER_RANKS_PER_NODE");
  PMPI_Allreduce(in.data(), ref.data(), 33, MPI_DOUBLE, MPI_SUM, comm);
  if (p % 2 == 0) {  // equal nodes of two: lanes can run
    ASSERT_TRUE(rc);
    EXPECT_EQ(calls(Collective::allreduce, "lanes"), 1u);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-9);
  } else {
    EXPECT_FALSE(rc);  // the last node has one rank: lanes is not eligible
  }
  PMPI_Comm_free(&comm);
}

TEST(PublicApi, PassesThroughWhatItDoesNotTake) {
  const int rank = world_rank();
  Override o("VENEER_ALLREDUCE", "0-inf:recursive_doubling");
  char chars[4] = {1, 2, 3, 4}, char_out[4];
  EXPECT_FALSE(alg::allreduce(chars, char_out, 4, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD));  // MPI_CHAR is not arithmetic
  MPI_Datatype two_ints;
  PMPI_Type_contiguous(2, MPI_INT, &two_ints);
  PMPI_Type_commit(&two_ints);
  int ints[4] = {rank, 1, 2, 3}, int_out[4];
  EXPECT_FALSE(alg::allreduce(ints, int_out, 2, two_ints, MPI_SUM, MPI_COMM_WORLD));  // predefined op, derived type
  PMPI_Type_free(&two_ints);
  EXPECT_FALSE(alg::allreduce(ints, int_out, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD));  // count 0
  EXPECT_FALSE(alg::allreduce(ints, int_out, 4, MPI_INT, MPI_REPLACE, MPI_COMM_WORLD));
  EXPECT_FALSE(alg::allreduce(ints, int_out, 4, MPI_INT, MPI_SUM, MPI_COMM_SELF));  // one rank
  EXPECT_FALSE(alg::allreduce(ints, int_out, 4, MPI_INT, MPI_SUM, MPI_COMM_NULL));
  EXPECT_FALSE(alg::bcast(ints, 4, MPI_INT, -1, MPI_COMM_WORLD));  // bad root: the library reports it
}

TEST(PublicApi, ConcurrentCollectivesOnTwoCommunicators) {
  int provided = 0;
  PMPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE || world_size() < 2) GTEST_SKIP() << "needs MPI_THREAD_MULTIPLE and two ranks";
  const int rank = world_rank();
  // Each thread builds its communicator's hierarchy inside its first call, concurrently.
  Override o("VENEER_ALLREDUCE", "0-1k:recursive_doubling,1k-inf:rabenseifner");
  MPI_Comm comms[2];
  PMPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
  PMPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
  int wrong[2] = {0, 0}, refused[2] = {0, 0};
  auto work = [&](int t) {
    std::vector<long> in(700), out(700), ref(700);
    for (int iteration = 0; iteration < 20; ++iteration) {
      const int n = iteration % 2 ? 700 : 9;
      for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = (rank + 1) * (i + iteration + 7 * t);
      auto rc = alg::allreduce(in.data(), out.data(), n, MPI_LONG, MPI_SUM, comms[t]);
      PMPI_Allreduce(in.data(), ref.data(), n, MPI_LONG, MPI_SUM, comms[t]);
      if (!rc || *rc != MPI_SUCCESS) ++refused[t];
      else if (!std::equal(out.begin(), out.begin() + n, ref.begin())) ++wrong[t];
    }
  };
  std::thread other(work, 1);
  work(0);
  other.join();
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
    EXPECT_EQ(refused[t], 0) << "thread " << t;
  }
  PMPI_Comm_free(&comms[0]);
  PMPI_Comm_free(&comms[1]);
}

// Decisions are remembered per (communicator, arguments); a freed
// communicator's handle may come back for a new one of another size, whose
// calls must be decided anew (a stale decision would run an algorithm on a
// freed hierarchy, or disagree between ranks).
TEST(Decisions, ForgottenWhenTheCommunicatorIsFreed) {
  const int p = world_size(), rank = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  Override o("VENEER_ALLREDUCE", "0-inf:ring");
  for (int round = 0; round < 6; ++round) {
    MPI_Comm comm;
    // Alternately the whole world and single-rank halves (which pass through).
    if (round % 2 == 0) PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
    else PMPI_Comm_split(MPI_COMM_WORLD, rank, 0, &comm);
    int size = 0;
    PMPI_Comm_size(comm, &size);
    std::vector<int> in(64), out(64, -1), ref(64, -2);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i) * (rank + 1) + round;
    PMPI_Allreduce(in.data(), ref.data(), 64, MPI_INT, MPI_SUM, comm);
    alg::reset_collectives_counts();
    for (int repeat = 0; repeat < 3; ++repeat) {  // the second and third calls are remembered decisions
      std::fill(out.begin(), out.end(), -1);
      auto rc = alg::allreduce(in.data(), out.data(), 64, MPI_INT, MPI_SUM, comm);
      if (size == 1) {
        EXPECT_FALSE(rc) << "round " << round;
      } else {
        ASSERT_TRUE(rc) << "round " << round;
        EXPECT_EQ(*rc, MPI_SUCCESS);
        EXPECT_EQ(out, ref) << "round " << round;
      }
    }
    EXPECT_EQ(calls(Collective::allreduce, size == 1 ? "library" : "ring"), 3u) << "round " << round;
    PMPI_Comm_free(&comm);
  }
}

// A trial's end (Remembered::settle): where nothing is left on trial and
// the library serves every pattern, the decision no longer depends on the
// call's pattern (`varies` cleared: the interposer's quick way, the root
// and the barriers unnoted); where a pattern keeps an algorithm, it still
// does. Both ways, what each pattern runs is what the trials left.
TEST(Decisions, TheLibraryForEveryPatternAfterTheTrialsVariesNoMore) {
  const auto list = alg::algorithms_for(Collective::bcast);
  ASSERT_FALSE(list.empty());
  const alg::Algorithm* binomial = alg::find_algorithm(Collective::bcast, "binomial");
  ASSERT_NE(binomial, nullptr);
  uint8_t index = 0;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == binomial) index = static_cast<uint8_t>(i + 1);
  // The model's choice for the first call since a barrier on trial, the
  // library for the call's own pattern.
  alg::Remembered r{.algorithm = nullptr, .collective = Collective::bcast};
  r.varies = alg::Remembered::first_since_barrier;
  r.after_barrier = index;
  r.on_trial = 1u << 2;
  alg::Remembered kept = r, dropped = r;
  kept.settle(2, true);
  EXPECT_EQ(kept.on_trial, 0);
  EXPECT_EQ(kept.varies, alg::Remembered::first_since_barrier);
  EXPECT_EQ(kept.alternative_for(2), binomial);
  dropped.settle(2, false);
  EXPECT_EQ(dropped.on_trial, 0);
  EXPECT_EQ(dropped.varies, 0);
  EXPECT_EQ(dropped.alternative_for(2), nullptr);
  EXPECT_EQ(dropped.alternative_for(0), nullptr);
  // Another pattern still on trial: it still varies.
  alg::Remembered pending = r;
  pending.on_trial |= 1u << 0;
  pending.settle(2, false);
  EXPECT_EQ(pending.on_trial, 1u);
  EXPECT_EQ(pending.varies, alg::Remembered::first_since_barrier);
}

// Decisions about derived types are remembered too (a collective on them
// then costs a lookup), and forgotten when any watched type is freed: its
// handle may come back as a type of another size, on which the ranks must
// decide afresh and alike.
TEST(Decisions, DerivedTypesRememberedUntilATypeIsFreed) {
  const int p = world_size(), rank = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  Override o("VENEER_BCAST", "0-inf:binomial");
  for (int round = 0; round < 4; ++round) {
    const int width = 2 + round;  // ints per element: each round a type of another size
    MPI_Datatype type = MPI_DATATYPE_NULL;
    ASSERT_EQ(MPI_Type_contiguous(width, MPI_INT, &type), MPI_SUCCESS);
    ASSERT_EQ(MPI_Type_commit(&type), MPI_SUCCESS);
    datatypes::note_committed(type);  // as the interposed MPI_Type_commit does
    ASSERT_TRUE(datatypes::watched(type));
    const alg::Call call{.collective = Collective::bcast, .count = 16, .type = type, .root = round % p};
    std::vector<int> buf(static_cast<size_t>(16 * width));
    alg::reset_collectives_counts();
    for (int repeat = 0; repeat < 3; ++repeat) {
      for (size_t i = 0; i < buf.size(); ++i)
        buf[i] = rank == call.root ? static_cast<int>(i) * 7 + round + repeat : -1;
      auto rc = alg::bcast(buf.data(), 16, type, call.root, MPI_COMM_WORLD);
      ASSERT_TRUE(rc) << "round " << round;
      EXPECT_EQ(*rc, MPI_SUCCESS);
      for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], static_cast<int>(i) * 7 + round + repeat) << i;
      EXPECT_NE(alg::recall_decision(alg::decision_key(call, MPI_COMM_WORLD)), nullptr) << "round " << round;
    }
    EXPECT_EQ(calls(Collective::bcast, "binomial"), 3u) << "round " << round;
    ASSERT_EQ(MPI_Type_free(&type), MPI_SUCCESS);
    EXPECT_EQ(alg::recall_decision(alg::decision_key(call, MPI_COMM_WORLD)), nullptr) << "round " << round;
  }
}

// Remembered decisions follow the rules in force: changing an override
// (collectives_init) changes the next call's algorithm.
TEST(Decisions, ForgottenWhenTheRulesChange) {
  const int p = world_size();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  std::vector<double> in(32, 1.0), out(32);
  const char* order[] = {"0-inf:ring", "0-inf:recursive_doubling", "0-inf:library", "0-inf:ring"};
  for (const char* rules : order) {
    Override o("VENEER_ALLREDUCE", rules);
    alg::reset_collectives_counts();
    for (int repeat = 0; repeat < 2; ++repeat)
      alg::allreduce(in.data(), out.data(), 32, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const std::string_view expected = std::string_view(rules).substr(6);
    EXPECT_EQ(calls(Collective::allreduce, expected), 2u) << rules;
    for (double v : out) EXPECT_EQ(v, static_cast<double>(p));
  }
}

}  // namespace
}  // namespace veneer::test
