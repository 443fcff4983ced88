// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Veneer's collectives, as the interposer calls them. Each returns nullopt
// when it does not take the call (the caller then passes it to the library
// unchanged), or the MPI return code of the algorithm that ran. Every
// decision uses only arguments MPI requires to be the same on all ranks, so
// all ranks of a communicator take the call or all pass it through.
//
// The first call on a communicator that is decided learns its node layout
// (one allgather on the communicator, inside that same collective call; no
// communicator is made). Veneer's private communicators are made only when
// one of its algorithms is chosen for that communicator (topology/hierarchy.h).
// Everything below calls the library through PMPI_* only, so these functions
// can be called from Veneer's MPI_Allreduce etc. without recursion.
// Nonblocking collectives are not handled: they pass through.
#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/cost_model.h"
#include "algorithms/decisions.h"
#include "topology/profile.h"

namespace veneer::algorithms {

// Reads VENEER_ALLREDUCE, VENEER_BCAST, ... (see tuning.h); call at MPI_Init,
// or again after changing the environment. Calls before it read the environment once.
void collectives_init();
// Frees MPI_COMM_WORLD's cached hierarchy; call before PMPI_Finalize.
void collectives_finalize();

std::optional<int> allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
std::optional<int> bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
std::optional<int> reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm);
std::optional<int> allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                             MPI_Datatype rtype, MPI_Comm comm);
std::optional<int> reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm);
std::optional<int> reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm);
std::optional<int> alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm);

// MPI_Barrier on comm: counted on its hierarchy, so that the next
// collective of each kind there is known to follow a barrier; only from the
// first decision about comm that depends on it (Hierarchy::barriers_counted),
// made at the same call on every rank of comm, so that they all count the
// same barriers. barriers_matter(): whether any decision of this process
// did (before it, MPI_Barrier goes straight to the library).
extern std::atomic<bool> g_barriers_matter;
[[gnu::always_inline]] inline bool barriers_matter() { return g_barriers_matter.load(std::memory_order_relaxed); }
void note_barrier(MPI_Comm comm);
// While a trial of a call that is the first since a barrier runs
// (algorithms/trial.h), each barrier is timed on its way through and its
// seconds noted (this thread, comm): the trial counts them with the call
// after them, so that what an algorithm leaves the next barrier to wait
// for (ranks set free at different times) is charged to it, as a loop of
// barrier and call pays it. Without them, MPICH on 3 ranks had two_level's
// 128 B allreduce at 9.8 us on the slowest rank against the library's 11.4,
// and a loop of barrier and call at 18.2-19.3 us against 13.6-13.8.
extern std::atomic<int> g_barrier_trials;
[[gnu::always_inline]] inline bool barriers_timed() { return g_barrier_trials.load(std::memory_order_relaxed) > 0; }
void note_barrier_seconds(MPI_Comm comm, double seconds);

// Per collective, which algorithms ran how often on this rank ("library" for
// calls passed through), one line per collective that was called.
std::string collectives_report();
struct AlgorithmCount {
  Collective collective;
  std::string_view algorithm;
  uint64_t calls;
};
std::vector<AlgorithmCount> collectives_counts();  // the same, as data (to sum over ranks)
void reset_collectives_counts();

// For a call of `bytes` (see tuning.h) on comm, with a commutative predefined
// op on a named type: every algorithm with its predicted time or why it is
// not eligible, and the choice. Collective over comm the first time (learns its layout).
std::string explain(Collective c, int64_t bytes, MPI_Comm comm);

// Replaces the cost model; the default until then.
void set_cost_model(const CostModel& model);
// Replaces it with a calibrated profile's (measured points, fitted levels):
// see measured.h; load_profile() there calls it at MPI_Init on every rank.
void set_profile(const topology::Profile& profile);
const CostModel& cost_model();

// A call of any collective, for tests and benchmarks. Bcast's buffer is rbuf.
struct Call {
  Collective collective = Collective::allreduce;
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  int count = 0;  // reductions, bcast; allgather/alltoall: receive side
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int scount = 0;  // allgather/alltoall send side
  MPI_Datatype stype = MPI_DATATYPE_NULL;
  const int* rcounts = nullptr;  // reduce_scatter
  MPI_Op op = MPI_OP_NULL;
  int root = 0;
};
// The first calls on a communicator that Veneer would decide that go to the
// library undecided (MPI_COMM_WORLD's and calls under a user's rule
// excepted); the next one is decided.
inline constexpr int kUndecidedCalls = 1;
// A call that would have been decided (reached the entry points above) and
// went to the library before that on this rank (device memory it does not
// stage) is counted among comm's undecided calls, as on the other ranks.
void seen_undecided(const Call& c, MPI_Comm comm);

// Counts decided together. A code whose counts change from call to call,
// and seldom come back (a panel factorisation's broadcasts, shrinking by a
// column each step), would otherwise pay a decision on nearly every call:
// 1.2 us over a 3.5 us broadcast at 2 ranks (Open MPI), more shapes than a
// thread's table holds. So a count of 16 or more is decided as the lowest
// count with its four leading bits (a bucket 1/8 octave wide, 8 per
// doubling), where the collective's rules, built-in and the user's, are
// the same for every size (no size boundary a bucket could straddle:
// count_buckets_for). The decision is a function of the bucket alone, so
// every rank makes the same one whichever count of the bucket it saw
// first; a choice the call's own count cannot run (collectives.cpp,
// runs_as_decided) goes to the library for that count, alike on every rank.
// Broadcasts, allgathers and alltoalls are bucketed by their bytes
// (agreed_call below), as their ranks may count them in different types.
namespace detail {
// A bit per collective (1 << Collective) whose counts are bucketed.
inline std::atomic<uint32_t> g_count_buckets{0};
}  // namespace detail
[[gnu::always_inline]] inline int decision_count(int n) {
  if (n < 16) return n;
  const int drop = 28 - __builtin_clz(static_cast<unsigned>(n));  // the bits below the leading four
  return n & ~((1 << drop) - 1);
}
[[gnu::always_inline]] inline bool counts_bucketed(Collective c) {
  return (detail::g_count_buckets.load(std::memory_order_relaxed) >> static_cast<unsigned>(c) & 1u) != 0;
}
// Sets which collectives' counts are bucketed from the rules in force
// (collectives_init, on every change of them).
struct Tuning;
void count_buckets_for(const Tuning& t);
// Bcast, Allgather and Alltoall move bytes, and the ranks of one call may
// describe them with different types and counts: MPI asks only that the
// type signatures match (a root's contiguous or vector type of n doubles,
// the others' n MPI_DOUBLE). What every rank agrees on is the bytes. The
// call as every rank of it sees it: each side's bytes as that many
// MPI_BYTE (a block of an allgather or alltoall; the send side as the
// receive side, which a matching signature makes it), bucketed as counts
// are (decision_count, of the bytes) where `bucket` and the collective's
// counts are bucketed; its decisions and trials are made for that, so
// that every rank makes the same. (Made for the call's own type and
// count, a root's derived type was never tried while the others' named
// type was, and the others ran a trial's blocks and barriers without it:
// the job hung; and a count of 1,000 doubles was decided as 960, the
// same bytes in one 8,000-byte type as 8,000.) Any other call, or one
// whose bytes cannot be counted or do not fit an int: `c` itself, which
// admit() refuses alike on every rank.
inline bool moves_bytes(Collective c) {
  return c == Collective::bcast || c == Collective::allgather || c == Collective::alltoall;
}
Call agreed_call(const Call& c, bool bucket = true);
// The call whose decision `c` shares: its counts bucketed where they are
// (a broadcast's, allgather's or alltoall's bytes: agreed_call).
inline Call decision_call(const Call& c) {
  if (moves_bytes(c.collective)) return agreed_call(c);
  if (!counts_bucketed(c.collective)) return c;
  Call out = c;
  out.count = decision_count(c.count);
  out.scount = decision_count(c.scount);
  return out;
}

// What a decision about `call` on comm is remembered by (decisions.h): its
// counts bucketed where they are (decision_count).
inline DecisionKey decision_key(const Call& c, MPI_Comm comm) {
  const bool bucketed = counts_bucketed(c.collective);
  return {.comm = comm,
          .type = c.type,
          .stype = c.stype,
          .op = c.op,
          .count = bucketed ? decision_count(c.count) : c.count,
          .scount = bucketed ? decision_count(c.scount) : c.scount,
          .root = c.root,
          .collective = c.collective,
          .in_place = c.sbuf == MPI_IN_PLACE};
}

// The sum of p counts, nullopt where one is negative or the sum is beyond an
// int (inline: the interposer's quick path sums over a noted size).
[[gnu::always_inline]] inline std::optional<int> counts_total(const int* counts, int p) {
  int64_t total = 0;
  bool valid = true;
  for (int i = 0; i < p; ++i) {
    valid &= counts[i] >= 0;
    total += counts[i];
  }
  if (!valid || total > INT_MAX) return std::nullopt;
  return static_cast<int>(total);
}
// Reduce_scatter's counts summed over comm's ranks: what its decisions are
// remembered by (their count), as its shape depends on the counts only
// through their total. Nullopt where a count is negative, the total is
// beyond an int, or comm is null or cannot be asked.
std::optional<int> scatter_total(const int* rcounts, MPI_Comm comm);

// Runs `algorithm` (or "library": PMPI on h.parent) for `call` on hierarchy h,
// bypassing the selection; nullopt (with why_not) when it is unknown, not
// eligible, or Veneer would not take such a call at all.
std::optional<int> run_with(std::string_view algorithm, const Call& call, const Hierarchy& h,
                            std::string* why_not = nullptr);
// The shape the selector would see for `call` on h; nullopt when Veneer would not take the call.
std::optional<Shape> shape_of(const Call& call, const Hierarchy& h);
// What the selector would choose for `call` on h ("library" or an algorithm name).
std::string_view chosen_for(const Call& call, const Hierarchy& h);

}  // namespace veneer::algorithms
