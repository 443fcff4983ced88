// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Trials: a choice the model made for a collective (one of Veneer's
// algorithms where the library was allowed) is confirmed on the
// application's own calls before it is kept. The first calls of each
// distinct shape on a communicator run in blocks of four (three above 64
// KiB a call, after an untimed block of two calls of each side to warm
// both; where the root moves on every call, on up to 8 ranks, whole turns
// of the root over the ranks after the first call), the
// algorithm's and the library's alternating, each timed on
// every rank over all but its first call (above 64 KiB, its first two;
// a call that is the first since
// a barrier with the barrier before it, which waits for what the call
// before it left behind); after VENEER_TRIAL calls of each
// side (rounded up to whole blocks of four; fewer above 64 KiB a call, down
// to two blocks for a challenger, four for the model's choice), one
// allreduce on the communicator finds each block's slowest rank, and where
// the library's median of those led by more than 10% the library serves
// that shape from then on; otherwise the algorithm stays.
//
// This is what makes a choice hold on patterns the calibration did not time
// (compute between calls, other rank counts, a rotating root, sizes between
// the measured ones): the profile predicts, the call pattern decides.
//
// On a rank count the profile timed, a choice whose measured lead over the
// library is thin (below 1.5x, select.h kThinLead) is tried by default as
// above: an application's pattern moves the times by more than that. So,
// where the library's own lead there is thin, the fastest algorithm is
// tried against it as a challenger (TrialRole::thin_challenger). A choice
// of the model's that its trial returns to the library is followed by the
// next fastest, where the library's lead over that one is thin too, tried
// against the library as a challenger (select.h, Choice::fallback).
//
// On a rank count the profile did not time (a sub-communicator, a job of
// another size), its numbers are a guess either way, and a trial runs by
// default (VENEER_TRIAL unset): an algorithm the model chose is tried as
// above, and where the model kept the library, a challenger (the algorithm
// fastest on the nearest rank count timed) is tried against it and takes
// the shape only where it led by more than 10%. The next one (the fastest
// on a farther count, where that is another) is tried after it the same
// way: against the library where the first was not taken, else against
// the first, which keeps the shape unless the next leads it by as much
// (decisions.h, Remembered::next_challenger and incumbent), where the
// formulas put the next more than 10% ahead of the first; last, the
// formulas' best, where it is neither and they put it more than 10% ahead
// of the library, against the library or the one taken
// (select.h, Choice::third_challenger).
//
// Every rank must run the same algorithm for every call, so a trial is keyed
// only by what MPI requires to be the same on every rank of the
// communicator (the collective, predefined types and counts, the op, the
// pattern condition, the algorithm chosen and its opponent; not the root, and not
// MPI_IN_PLACE, which only a reduce's root may give; for a broadcast,
// allgather or alltoall, only its bytes, as its ranks may give them in
// different types: collectives.h agreed_call), and the calls of one key
// come in the same order on every rank. Reductions with derived types
// (user-defined ops), and choices a rule forced, are not tried.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/collectives.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {

enum class Verdict : uint8_t { trying, keep, drop };

// What a trial asks of the algorithm tried:
//  - model: the model's choice; kept unless the opponent led by more than 10%;
//  - thin: the model's choice on a count the profile timed, where its
//    measured lead was thin; kept only where it did not trail the library,
//    on the slowest rank nor on the ranks' mean (a tie passes through;
//    in a trial of fewer than four pairs, as `model`);
//  - challenger: the model kept the opponent; taken only by leading it;
//  - thin_challenger: a challenger to a thin lead of the library's on a
//    count the profile timed (Choice::thin_challenger); taken only by
//    leading it as a challenger does, and by not trailing it on the ranks'
//    mean either, as a thin lead of the model's choice must not.
enum class TrialRole : uint8_t { model, thin, challenger, thin_challenger };
constexpr bool is_challenger(TrialRole r) { return r == TrialRole::challenger || r == TrialRole::thin_challenger; }

// Calls above this many bytes are tried in short trials (blocks of two
// calls, fewer pairs in proportion to the bytes), and the model's choice of
// an algorithm for them is tried whatever its measured lead, the root
// fixed (algorithms/collectives.cpp decide): the library's own time for a large
// call can differ several times over from one launch to the next (under
// MPICH on 3-4 ranks over 2 cores, its 512 KiB reduce after a barrier ran
// at 275 us in some launches and 868 us in others, two_level at 370 us in
// all), and a short trial costs such a call's job a few of its calls.
constexpr int64_t kFullTrialBytes = int64_t{64} << 10;
// Whether calls like `c` are above kFullTrialBytes (the caller leaves out a moved root).
bool tried_whatever_its_lead(const Call& c);

// Whether calls like `c` may be tried (VENEER_TRIAL is not 0, and the key
// above can be formed from its arguments). Which choices are tried is the
// caller's (algorithms/collectives.cpp decide).
bool triable(const Call& c);

// The trial of `a` for calls like `c` in pattern `condition` (0: the
// call's own, 1: its root moved, 2: first since a barrier) on h, against
// `opponent` (nullptr: the library), in `role` (above). While the trial runs, this call is run here, by `a` or by the
// opponent, and *ran holds its return code; the verdict after it (drop:
// the opponent serves the shape). Once the trial is over the call is not
// run (*ran stays empty) and the verdict says by whom it should be.
//
// A challenger taken is not the end where another one follows it
// (Remembered::next_challenger): the next is tried against it, in the
// library's place, so that the first to lead the library does not shut
// out one that leads both (on the 2-host cluster, binomial led the
// library's 512 KiB broadcast from a rotating root by 1.3x and two_level,
// tried after it, would have led by 2.5x).
Verdict trial_run(const Algorithm& a, const Call& c, const Hierarchy& h, uint8_t condition, TrialRole role,
                  const Algorithm* opponent, std::optional<int>* ran);

// What won beside calls like `c` on h in pattern `condition` (as
// trial_run numbers them): the algorithm that served a shape of the same
// collective after leading its opponent by more than 10% in a trial, where
// that shape is the nearest in bytes (within 8x either way) among those
// whose trials ended before calls like c were first asked about on h;
// nullptr where there is none. The first answer for a shape is given again
// on every later asking, so that a decision made again (another thread's,
// or after its table slot was reused) is the same on every rank. Where the
// model keeps the library, such a winner is tried first (collectives.cpp):
// a shape between the sizes the calibration timed, or on a rank count it
// did not time, meets what the job's own calls found faster beside it.
// Under Open MPI on 5 ranks (a 4-rank profile), lanes took the 512 KiB
// allreduce after a barrier from the library by 1.8x, and the 1 MiB one,
// where only rabenseifner was tried, stayed with the library at 1.8x
// behind lanes. `first`: set where this was the shape's first asking.
const Algorithm* neighbours_winner(const Call& c, const Hierarchy& h, uint8_t condition, bool* first = nullptr);

// Block pairs a challenger must win, of `pairs` (three in four, rounded
// up), beside leading the library's median by more than 10%. A challenger
// whose lost pairs already rule that out ends its trial without running its
// remaining blocks (looked at after every pair above 64 KiB a call, half way
// below); one that won every pair by 1.5x at half way takes the shape there.
// A trial of fewer than four pairs (calls above 128 KiB) asks a lead of
// 1.5x; a challenger that won all of its pairs by less, but by more than
// 10%, runs pairs up to four and is judged as a trial of four is.
size_t pairs_to_win(size_t pairs);

// Tests: every trial call of `a` counts `seconds` more on this rank (0: none;
// `a` null: the library's calls), on either side of a trial; up to four
// sides at once, each with its own. no_handicaps_for_testing() clears them.
void handicap_for_testing(const Algorithm* a, double seconds);
void no_handicaps_for_testing();

// Trials ended in this process: of the model's choices, kept (the algorithm
// was not slower on the application's calls beyond the margin) and dropped
// (the library led); of challengers, taken (led the library) and not; and
// trials spared, ended before their first call where the same algorithm
// had lost beside the shape (a size at most 2x away, same pattern).
struct TrialCounts {
  uint64_t kept = 0;
  uint64_t dropped = 0;
  uint64_t taken = 0;
  uint64_t not_taken = 0;
  uint64_t spared = 0;
  uint64_t calls = 0;     // calls run in trials (either side, untimed ones too)
  uint64_t barriers = 0;  // barriers of the trials' own before their blocks
};
TrialCounts trial_counts();
void reset_trial_counts();
// "2 kept, 1 returned to the library; 1 challenger taken, 3 not; 4 spared
// (lost beside)", or empty where no trial ended.
std::string trial_counts_text();

// A trial that ended with both sides' medians (each block's slowest rank,
// per call), for a check of the trials against steady batches
// (veneer-model-check): what was tried, against what (nullptr: the
// library), in which pattern (as trial_run numbers them), and the verdict.
struct TrialRecord {
  Collective collective = Collective::allreduce;
  int64_t bytes = 0;
  uint8_t condition = 0;
  const Algorithm* algorithm = nullptr;
  const Algorithm* opponent = nullptr;
  double seconds = 0;           // the algorithm's median block, per call
  double opponent_seconds = 0;  // the opponent's
  bool taken = false;           // the algorithm serves the shape after it
};
// The records of this process's trials since reset_trial_records() (the
// last 256 of them).
std::vector<TrialRecord> trial_records();
void reset_trial_records();

}  // namespace veneer::algorithms
