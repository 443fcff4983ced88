// SPDX-License-Identifier: BSD-3-Clause
// Collectives the library serves, through Veneer's entry points: from the
// second call of a shape on they are answered by the quick path
// (interposer/collectives.cpp surely_library: one lookup), for every root of
// a rotating broadcast and reduce and for MPI_IN_PLACE, and every result is
// the library's own (PMPI_*) on the same inputs. Run once with the selector's
// defaults (the quick path is checked wherever the decision is the library),
// and with rules that leave these calls to the library, with
// VENEER_COLLECTIVES=0 and with VENEER_DISABLE=1
// (QUICK_COLLECTIVES_ALL_LIBRARY=1: checked for every call).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/decisions.h"
#include "interposer/switchboard.h"
#include "support/config.h"
#include "test/mpi/ranks.h"

namespace {

namespace alg = veneer::algorithms;

bool all_library() {
  const char* v = std::getenv("QUICK_COLLECTIVES_ALL_LIBRARY");
  return v && std::strcmp(v, "1") == 0;
}

// Whether the interposer marks library decisions for its quick path here:
// not while a report counts every call, nor while device memory may be
// present and Veneer takes collectives.
// The device byte is down after every dlopen until something asks, which
// happens at different times on different ranks: it is settled first.
bool quick_path_open() {
  const veneer::Config& c = veneer::config();
  veneer::settle_device_byte(c);
  return c.collectives_quick && (!veneer::takes_collective(c) || !veneer::device_byte_down(c));
}

// Whether `v` holds on every rank: a test skipped on some ranks only would
// leave the others waiting in its collectives.
bool on_every_rank(bool v) {
  int mine = v ? 1 : 0, all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

// Where the decision for `call` is the library with nothing to note, the
// quick path must answer it (true); otherwise nothing to check (false).
bool expect_quick(const alg::Call& call, const char* what, int round) {
  const alg::DecisionKey key = alg::decision_key(call, MPI_COMM_WORLD);
  const alg::Remembered* d = alg::recall_decision(key);
  if (!all_library() && (!d || d->algorithm || d->varies)) return false;
  EXPECT_NE(d, nullptr) << what << ", round " << round << ": not remembered";
  EXPECT_TRUE(alg::library_answers(key)) << what << ", root " << call.root << ", round " << round;
  return true;
}

TEST(QuickCollectives, RotatingRootsAndInPlaceGiveTheLibrarysResults) {
  if (!on_every_rank(quick_path_open()))
    GTEST_SKIP() << "the quick path is closed here (a report, or device memory possible)";
  const int me = rank_of(), p = size_of();
  constexpr int kRounds = 4, kInts = 4;
  int checked = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int root = 0; root < p; ++root) {
      // Broadcast of 8 bytes from the root.
      std::vector<char> mine(8), want(8);
      for (int i = 0; i < 8; ++i) mine[static_cast<size_t>(i)] = static_cast<char>(me == root ? 10 * round + i : -1);
      want = mine;
      ASSERT_EQ(PMPI_Bcast(want.data(), 8, MPI_BYTE, root, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(MPI_Bcast(mine.data(), 8, MPI_BYTE, root, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_EQ(mine, want) << "bcast, root " << root << ", round " << round;
      // Reduce of a few ints to the root, and to the root in place.
      std::vector<int> in(kInts), out(kInts, -1), ref(kInts, -2);
      std::iota(in.begin(), in.end(), 100 * me + round);
      ASSERT_EQ(PMPI_Reduce(in.data(), ref.data(), kInts, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(MPI_Reduce(in.data(), out.data(), kInts, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD), MPI_SUCCESS);
      if (me == root) EXPECT_EQ(out, ref) << "reduce, root " << root << ", round " << round;
      std::vector<int> inout = in;
      ASSERT_EQ(MPI_Reduce(me == root ? MPI_IN_PLACE : inout.data(), inout.data(), kInts, MPI_INT, MPI_SUM, root,
                           MPI_COMM_WORLD),
                MPI_SUCCESS);
      if (me == root) EXPECT_EQ(inout, ref) << "reduce in place, root " << root << ", round " << round;
      if (round == 0) continue;  // the first call of each shape goes the full way and marks it
      checked += expect_quick({.collective = alg::Collective::bcast, .count = 8, .type = MPI_BYTE, .root = root},
                              "bcast", round);
      checked += expect_quick({.collective = alg::Collective::reduce,
                               .sbuf = in.data(),
                               .count = kInts,
                               .type = MPI_INT,
                               .op = MPI_SUM,
                               .root = root},
                              "reduce", round);
    }
    // Allreduce in place and out of place, and an allgather.
    std::vector<int> in(kInts), out(kInts, -1), ref(kInts, -2);
    std::iota(in.begin(), in.end(), 7 * me + round);
    ASSERT_EQ(PMPI_Allreduce(in.data(), ref.data(), kInts, MPI_INT, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), kInts, MPI_INT, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(out, ref) << "allreduce, round " << round;
    std::vector<int> inout = in;
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, inout.data(), kInts, MPI_INT, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(inout, ref) << "allreduce in place, round " << round;
    std::vector<int> gathered(static_cast<size_t>(kInts * p), -1), gathered_ref(gathered.size(), -2);
    ASSERT_EQ(PMPI_Allgather(in.data(), kInts, MPI_INT, gathered_ref.data(), kInts, MPI_INT, MPI_COMM_WORLD),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Allgather(in.data(), kInts, MPI_INT, gathered.data(), kInts, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(gathered, gathered_ref) << "allgather, round " << round;
    if (round == 0) continue;
    const alg::Call allreduce{
        .collective = alg::Collective::allreduce, .sbuf = in.data(), .count = kInts, .type = MPI_INT, .op = MPI_MAX};
    checked += expect_quick(allreduce, "allreduce", round);
    alg::Call in_place = allreduce;
    in_place.sbuf = MPI_IN_PLACE;
    checked += expect_quick(in_place, "allreduce in place", round);
    checked += expect_quick({.collective = alg::Collective::allgather,
                             .sbuf = in.data(),
                             .count = kInts,
                             .type = MPI_INT,
                             .scount = kInts,
                             .stype = MPI_INT},
                            "allgather", round);
  }
  // On one rank every collective is the library's (nothing to choose); with
  // the rules, every call above was checked.
  if (all_library() || p == 1) EXPECT_GT(checked, 0);
}

// Reduce_scatter is remembered by the total of its counts (its shape depends
// on nothing else of them): calls whose counts differ but add up to the same
// total share one decision, and each gives the library's result.
TEST(QuickCollectives, ReduceScatterIsRememberedByTheTotalOfItsCounts) {
  const int me = rank_of(), p = size_of();
  const veneer::Config& c = veneer::config();
  for (int round = 0; round < 3; ++round) {
    for (int shift = 0; shift < p; ++shift) {
      std::vector<int> counts(static_cast<size_t>(p));
      for (int i = 0; i < p; ++i) counts[static_cast<size_t>(i)] = 2 + (i + shift) % p;  // the same total
      const int total = std::accumulate(counts.begin(), counts.end(), 0);
      std::vector<double> in(static_cast<size_t>(total));
      for (int i = 0; i < total; ++i) in[static_cast<size_t>(i)] = 1.0 + i + 100.0 * me + round;
      const auto mine = static_cast<size_t>(counts[static_cast<size_t>(me)]);
      std::vector<double> out(mine, -1.0), want(mine, -2.0);
      ASSERT_EQ(MPI_Reduce_scatter(in.data(), out.data(), counts.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                MPI_SUCCESS);
      ASSERT_EQ(PMPI_Reduce_scatter(in.data(), want.data(), counts.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                MPI_SUCCESS);
      EXPECT_EQ(out, want) << "round " << round << ", shift " << shift;
      if (!veneer::takes_collective(c) || !c.collectives) continue;  // the library's without a decision
      const alg::Call call{.collective = alg::Collective::reduce_scatter,
                           .sbuf = in.data(),
                           .rbuf = out.data(),
                           .type = MPI_DOUBLE,
                           .rcounts = counts.data(),
                           .op = MPI_SUM};
      alg::DecisionKey key = alg::decision_key(call, MPI_COMM_WORLD);
      key.count = total;
      const alg::Remembered* d = alg::recall_decision(key);  // (no trials for Reduce_scatter: never on trial)
      EXPECT_NE(d, nullptr) << "round " << round << ", shift " << shift << ": not remembered by its total";
      // Marked for the quick path, which sums the counts itself.
      if (quick_path_open() && (round > 0 || shift > 0)) {
        alg::Call by_total = call;
        by_total.count = total;
        expect_quick(by_total, "reduce_scatter", round);
      }
    }
  }
}

// The quick path keeps the sizes of the communicators Reduce_scatter went
// to it on; a communicator freed and made again (often under the same
// handle) with another size must not be summed over the old one's ranks.
// The counts are exactly as many as the ranks (a read past them shows under
// the address sanitiser) and each result is the library's.
TEST(QuickCollectives, ReduceScatterOnCommunicatorsMadeAgainWithOtherSizes) {
  const int me = rank_of();
  for (int round = 0; round < 6; ++round) {
    MPI_Comm sub = MPI_COMM_NULL;
    // Every rank together, then each rank alone, and so on.
    ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, round % 2 ? me : 0, me, &sub), MPI_SUCCESS);
    int n = 0, r = 0;
    MPI_Comm_size(sub, &n);
    MPI_Comm_rank(sub, &r);
    const auto counts = std::make_unique<int[]>(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) counts[static_cast<size_t>(i)] = 1 + (i + round) % 3;
    const int total = std::accumulate(counts.get(), counts.get() + n, 0);
    std::vector<long> in(static_cast<size_t>(total));
    std::iota(in.begin(), in.end(), 1000L * me + round);
    const auto mine = static_cast<size_t>(counts[static_cast<size_t>(r)]);
    for (int call = 0; call < 3; ++call) {
      std::vector<long> out(mine, -1), want(mine, -2);
      ASSERT_EQ(MPI_Reduce_scatter(in.data(), out.data(), counts.get(), MPI_LONG, MPI_SUM, sub), MPI_SUCCESS);
      ASSERT_EQ(PMPI_Reduce_scatter(in.data(), want.data(), counts.get(), MPI_LONG, MPI_SUM, sub), MPI_SUCCESS);
      EXPECT_EQ(out, want) << "round " << round << " (" << n << " ranks), call " << call;
    }
    ASSERT_EQ(MPI_Comm_free(&sub), MPI_SUCCESS);
  }
}

// User-defined ops: a commutative sum, and a non-commutative op (the left
// operand: the result is rank 0's vector). A decision about a call with one
// is remembered only where any user-defined op gets the library, so an op
// freed and made again (often under the same handle) as the other kind
// gets the library's result; where remembered, the quick path answers it.
void add_longs(void* in, void* inout, int* n, MPI_Datatype* /*type*/) {
  for (int i = 0; i < *n; ++i) static_cast<long*>(inout)[i] += static_cast<const long*>(in)[i];
}
void left_operand(void* in, void* inout, int* n, MPI_Datatype* /*type*/) {
  std::memcpy(inout, in, static_cast<size_t>(*n) * sizeof(long));
}

TEST(QuickCollectives, UserOpsFreedAndMadeAgainGiveTheLibrarysResults) {
  const int me = rank_of(), p = size_of();
  constexpr int kLongs = 3;
  int checked = 0;
  for (int round = 0; round < 6; ++round) {
    const bool commutative = round % 2 == 0;
    MPI_Op op = MPI_OP_NULL;
    ASSERT_EQ(MPI_Op_create(commutative ? add_longs : left_operand, commutative ? 1 : 0, &op), MPI_SUCCESS);
    const std::vector<int> counts(static_cast<size_t>(p), kLongs);
    for (int call = 0; call < 3; ++call) {
      std::vector<long> in(static_cast<size_t>(kLongs * p));
      std::iota(in.begin(), in.end(), 1000L * me + 10L * round + call);
      std::vector<long> out(kLongs, -1), want(kLongs, -2);
      ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), kLongs, MPI_LONG, op, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(PMPI_Allreduce(in.data(), want.data(), kLongs, MPI_LONG, op, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_EQ(out, want) << "allreduce, round " << round << ", call " << call;
      const int root = call % p;
      out.assign(kLongs, -1);
      want.assign(kLongs, -2);
      ASSERT_EQ(MPI_Reduce(in.data(), out.data(), kLongs, MPI_LONG, op, root, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(PMPI_Reduce(in.data(), want.data(), kLongs, MPI_LONG, op, root, MPI_COMM_WORLD), MPI_SUCCESS);
      if (me == root) EXPECT_EQ(out, want) << "reduce to " << root << ", round " << round << ", call " << call;
      out.assign(kLongs, -1);
      want.assign(kLongs, -2);
      ASSERT_EQ(MPI_Reduce_scatter(in.data(), out.data(), counts.data(), MPI_LONG, op, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(PMPI_Reduce_scatter(in.data(), want.data(), counts.data(), MPI_LONG, op, MPI_COMM_WORLD), MPI_SUCCESS);
      EXPECT_EQ(out, want) << "reduce_scatter, round " << round << ", call " << call;
      if (call == 0 || !quick_path_open()) continue;
      const alg::Call allreduce{
          .collective = alg::Collective::allreduce, .sbuf = in.data(), .count = kLongs, .type = MPI_LONG, .op = op};
      checked += expect_quick(allreduce, "allreduce with a user op", round);
      checked += expect_quick({.collective = alg::Collective::reduce_scatter,
                               .sbuf = in.data(),
                               .count = kLongs * p,
                               .type = MPI_LONG,
                               .op = op},
                              "reduce_scatter with a user op", round);
    }
    ASSERT_EQ(MPI_Op_free(&op), MPI_SUCCESS);
  }
  // On one rank every call is the library's for any op: remembered and marked.
  if (quick_path_open() && (all_library() || p == 1)) EXPECT_GT(checked, 0);
}

// Alltoallw and Neighbor_alltoallw read their arrays over the peer counts
// noted for the communicator (interposer/noted_comms.h): on communicators
// made again under the same handle with other sizes and other Cartesian
// dimensions, every result is the library's, with arrays exactly as long as
// the peers (a read past them shows under the address sanitiser), types a
// block that are never packed and, every third round, a strided type Veneer may pack.
TEST(QuickCollectives, AlltoallwOnCommunicatorsMadeAgainWithOtherShapes) {
  const int me = rank_of();
  MPI_Datatype strided = MPI_DATATYPE_NULL;
  MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &strided);
  MPI_Type_commit(&strided);
  constexpr int kSlot = 8;  // doubles a peer's block may span
  for (int round = 0; round < 6; ++round) {
    MPI_Comm sub = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, round % 2 ? me : 0, me, &sub), MPI_SUCCESS);
    int n = 0;
    MPI_Comm_size(sub, &n);
    const MPI_Datatype type = round % 3 == 2 ? strided : MPI_DOUBLE;
    const int count = type == strided ? 1 : 4;
    auto check = [&](MPI_Comm comm, int peers, bool neighbours) {
      const auto np = static_cast<size_t>(peers);
      const auto counts = std::make_unique<int[]>(np);
      const auto types = std::make_unique<MPI_Datatype[]>(np);
      const auto displs = std::make_unique<int[]>(np);
      const auto adispls = std::make_unique<MPI_Aint[]>(np);
      for (size_t i = 0; i < np; ++i) {
        counts[i] = count;
        types[i] = type;
        displs[i] = static_cast<int>(i * kSlot * sizeof(double));
        adispls[i] = displs[i];
      }
      std::vector<double> in(np * kSlot);
      std::iota(in.begin(), in.end(), 100.0 * me + round);
      for (int call = 0; call < 3; ++call) {
        std::vector<double> out(np * kSlot, -1.0), want(np * kSlot, -1.0);
        if (neighbours) {
          ASSERT_EQ(MPI_Neighbor_alltoallw(in.data(), counts.get(), adispls.get(), types.get(), out.data(),
                                           counts.get(), adispls.get(), types.get(), comm),
                    MPI_SUCCESS);
          ASSERT_EQ(PMPI_Neighbor_alltoallw(in.data(), counts.get(), adispls.get(), types.get(), want.data(),
                                            counts.get(), adispls.get(), types.get(), comm),
                    MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Alltoallw(in.data(), counts.get(), displs.get(), types.get(), out.data(), counts.get(),
                                  displs.get(), types.get(), comm),
                    MPI_SUCCESS);
          ASSERT_EQ(PMPI_Alltoallw(in.data(), counts.get(), displs.get(), types.get(), want.data(), counts.get(),
                                   displs.get(), types.get(), comm),
                    MPI_SUCCESS);
        }
        EXPECT_EQ(out, want) << (neighbours ? "neighbor_alltoallw" : "alltoallw") << ", round " << round << " ("
                             << peers << " peers), call " << call;
      }
    };
    check(sub, n, false);
    // A periodic ring of the same ranks in one dimension, or in two (the
    // second of extent 1): two neighbours, or four.
    const int ndims = round % 2 ? 2 : 1;
    int dims[2] = {n, 1}, periods[2] = {1, 1};
    MPI_Comm cart = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Cart_create(sub, ndims, dims, periods, 0, &cart), MPI_SUCCESS);
    check(cart, 2 * ndims, true);
    ASSERT_EQ(MPI_Comm_free(&cart), MPI_SUCCESS);
    ASSERT_EQ(MPI_Comm_free(&sub), MPI_SUCCESS);
  }
  MPI_Type_free(&strided);
}

// Freeing a communicator forgets the decisions about it, and, while the
// freeing thread is the only one holding decisions, only those: the world's
// stay marked. With another thread holding state about communicators, a
// free forgets every decision. Each result is the library's.
TEST(QuickCollectives, FreeingACommunicatorForgetsItsOwnDecisions) {
  if (!all_library() || !on_every_rank(quick_path_open()))
    GTEST_SKIP() << "checked with every call left to the library";
  // Switched off, every call is the library's and no communicator is
  // watched: what is remembered says so whatever the handle comes to mean.
  const veneer::Config& c = veneer::config();
  if (!veneer::takes_collective(c) || !c.collectives) GTEST_SKIP() << "collectives switched off";
  const int me = rank_of();
  const alg::Call call{.collective = alg::Collective::allreduce, .count = 1, .type = MPI_LONG, .op = MPI_SUM};
  auto allreduce = [&](MPI_Comm comm) {
    long in = me + 1, out = -1, want = -2;
    ASSERT_EQ(MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, comm), MPI_SUCCESS);
    ASSERT_EQ(PMPI_Allreduce(&in, &want, 1, MPI_LONG, MPI_SUM, comm), MPI_SUCCESS);
    EXPECT_EQ(out, want);
  };
  const alg::DecisionKey world = alg::decision_key(call, MPI_COMM_WORLD);
  for (int other_holder = 0; other_holder < 2; ++other_holder) {
    for (int repeat = 0; repeat < 2; ++repeat) allreduce(MPI_COMM_WORLD);
    ASSERT_TRUE(alg::library_answers(world));
    MPI_Comm dup = MPI_COMM_NULL;
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &dup), MPI_SUCCESS);
    for (int repeat = 0; repeat < 2; ++repeat) allreduce(dup);
    const alg::DecisionKey mine = alg::decision_key(call, dup);
    ASSERT_TRUE(alg::library_answers(mine));
    // Another thread that holds state about communicators (and stays until the free is done).
    std::promise<void> freed;
    std::promise<void> holding;
    std::thread holder;
    if (other_holder) {
      holder = std::thread([&] {
        alg::hold_communicator_state();
        holding.set_value();
        freed.get_future().wait();
      });
      holding.get_future().wait();
    }
    ASSERT_EQ(MPI_Comm_free(&dup), MPI_SUCCESS);
    EXPECT_EQ(alg::recall_decision(mine), nullptr) << "the freed communicator's decision is forgotten";
    if (other_holder) EXPECT_FALSE(alg::library_answers(world)) << "with another holder, every decision goes";
    else EXPECT_TRUE(alg::library_answers(world)) << "the world's decision stays marked";
    if (other_holder) {
      freed.set_value();
      holder.join();
    }
    allreduce(MPI_COMM_WORLD);
  }
}

TEST(QuickCollectives, AForgottenDecisionIsDecidedAgainAndMarkedAgain) {
  if (!all_library() || !on_every_rank(quick_path_open()))
    GTEST_SKIP() << "checked with every call left to the library";
  const alg::Call call{.collective = alg::Collective::bcast, .count = 16, .type = MPI_BYTE, .root = 0};
  std::vector<char> buf(16);
  for (int repeat = 0; repeat < 2; ++repeat)
    ASSERT_EQ(MPI_Bcast(buf.data(), 16, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  const alg::DecisionKey key = alg::decision_key(call, MPI_COMM_WORLD);
  ASSERT_TRUE(alg::library_answers(key));
  // What a freed communicator or type does: every decision is stale.
  alg::forget_decisions();
  EXPECT_FALSE(alg::library_answers(key));
  EXPECT_EQ(alg::recall_decision(key), nullptr);
  for (int i = 0; i < 16; ++i) buf[static_cast<size_t>(i)] = static_cast<char>(rank_of() == 0 ? i : 0);
  ASSERT_EQ(MPI_Bcast(buf.data(), 16, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(buf[static_cast<size_t>(i)], i);
  EXPECT_TRUE(alg::library_answers(key)) << "the call after decides again and marks the decision";
}

}  // namespace
