// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The selector: among the algorithms a rule allows and whose preconditions
// hold, the one with the least predicted time, unless the library's own time
// is close enough that the model's uncertainty could reverse the ranking
// (cost_model.h: measured spreads, or the formulas' margin).
//
// choose() runs on the path of real calls: it builds no strings and
// allocates nothing. reason() turns a Choice into text, for logs and explain.
#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/cost_model.h"
#include "algorithms/tuning.h"

namespace veneer::algorithms {

// How a choice was made.
enum class Decision : uint8_t {
  forced,             // a rule named one algorithm, and it is eligible
  forced_library,     // a rule named the library
  forced_ineligible,  // a rule named one algorithm that is not eligible: the library
  no_eligible,        // nothing the rule allows is eligible: the library
  library_kept,       // the library's time is too close to (or below) the best algorithm's
  model,              // the model's pick (the library allowed and beaten, or not allowed)
};

// A lead the profile measured thin, on a rank count it timed: the side
// that leads by less than this is not taken on the profile's word alone
// (algorithms/trial.h, Choice::thin_lead). The model's choice so led is
// tried on the job's own calls (TrialRole::thin); where the library so
// leads, the fastest algorithm is tried against it as a challenger
// (TrialRole::thin_challenger).
// The calibration times back-to-back batches on its own job; an
// application's pattern moves the times by more than such a lead.
constexpr double kThinLead = 1.5;

struct Choice {
  const Algorithm* algorithm = nullptr;  // nullptr: the library
  double predicted_seconds = 0;          // of the chosen one
  Source source = Source::defaults;      // of predicted_seconds
  double library_seconds = 0;
  Source library_source = Source::defaults;
  double spread = 0, library_spread = 0;  // relative, measured sources only
  Decision decision = Decision::library_kept;
  const Algorithm* best = nullptr;  // the fastest algorithm considered (also when the library kept the call)
  double best_seconds = 0;
  const Rule* rule = nullptr;  // the rule in force (nullptr: none); owned by the Tuning
  bool rule_from_user = false;
  bool from_measurements = false;    // the ranking used the profile's measured points
  double margin = 0;                 // the formulas' margin (formula_margin), when they decided
  bool lost_at_a_neighbour = false;  // interpolated win, not ahead beyond the spreads at a measured size on either side
  int behind_left_out = 0;           // measured candidates left out as slower than the library in a condition
  bool best_behind = false;          // every candidate left out so; `best` is the fastest of them
  bool within_barrier_skew = false;  // after a barrier, ahead by less than after_barrier_min_gain
  // Decided on the profile's other rank counts (Source::other_ranks): how
  // many agreed, the nearest one (whose times predicted_seconds and
  // library_seconds are), and the chosen one's smallest lead over them.
  int rank_counts = 0;
  int nearest_ranks = 0;
  double lead = 0;
  // The profile timed this collective, but not on this shape's rank count:
  // the choice is a guess the job's own calls should check (algorithms/trial.h).
  bool untimed = false;
  // Where the library is kept on such a shape: the algorithm to try against
  // it (the fastest on the nearest rank count timed, else `best`), or null;
  // and the one tried next where it does not take the shape (the fastest on
  // a farther count timed, where that is another), or null. On a timed
  // count, see thin_lead.
  const Algorithm* challenger = nullptr;
  const Algorithm* next_challenger = nullptr;
  // Whether the next one is also tried where the first takes the shape,
  // against it in the library's place: where the model predicts it more
  // than 10% faster than the first on this shape (else it is tried only
  // where the first was not taken).
  bool next_against_first = false;
  // Tried after those two (against the library, or against the one of them
  // taken): the formulas' best, where it is neither of them and the
  // formulas give it a lead of more than 10% over the library.
  const Algorithm* third_challenger = nullptr;
  // On a rank count the profile timed, the side chosen leads the other by
  // less than kThinLead: the model's choice over the library, or the
  // library over `best`, which is then the challenger (and the next
  // fastest, where the library's lead over it is thin too, the next
  // challenger, tried where the first is not taken). Open
  // MPI's reduce of 16 B at 3 ranks, first since a barrier, which the
  // library led by 1.2x in a 4-rank job's profile (timed on 3 of its
  // ranks), ran 5x slower than binomial in a 3-rank job.
  bool thin_lead = false;
  // On a rank count the profile timed, where the model's choice leads the
  // library by kThinLead or more (so is not tried against it), the next
  // fastest algorithm where the choice leads it by less than kThinLead: it
  // is tried against the choice as a challenger to a thin lead is against
  // the library (TrialRole::thin_challenger). Open MPI's allreduce of 1 MiB
  // on 3 ranks, where a 4-rank job's profile put ring 3% ahead of lanes
  // (timed on 3 of its ranks), ran 1.6x slower than lanes in a 3-rank job.
  // Not for a call whose root moved.
  const Algorithm* runner_up = nullptr;
  // Where the model chose an algorithm: the next fastest (left out as
  // behind the library in a condition or not), where the library does not
  // lead it by kThinLead, or null. Where the choice is tried
  // against the library (a thin lead on a count the profile timed, a count
  // it did not time, VENEER_TRIAL) and returned to it, this one is tried
  // next, as a challenger to the library (to a thin lead of it, where the
  // choice was tried for a thin lead), as the fastest algorithm is where
  // the library's lead is thin: it takes the shape only by leading.
  // MPICH's reduce of 64 KiB-1 MiB first since a barrier on 3 ranks, where
  // a 4-rank job's profile (timed on 3 of its ranks) put
  // reduce_scatter_gather first and two_level second: the trial returned
  // reduce_scatter_gather to the library (0.6-0.9x of it), and two_level,
  // 1.7-2.1x faster than the library there, was never tried.
  const Algorithm* fallback = nullptr;
};

Choice choose(const Shape& s, const Tuning& t, const CostModel& m);
// Where c kept the library (as the model's choice, the library allowed),
// `a` is tried first against it, before the challengers c names (which
// follow it in their order: the first where `a` is not taken, and above
// 64 KiB a call also where it is and m gives the first a shorter time; the
// next ones against the one taken): true. False, c unchanged, where c chose
// an algorithm, `a` is already its first challenger, or the rule in force
// or the shape does not allow `a`.
bool try_first(Choice& c, const Algorithm* a, const Shape& s, const CostModel& m);
// The same over a given list of candidates for s.collective (choose() gives
// the registry's, algorithms_for()): as many as there are.
Choice choose_among(std::span<const Algorithm* const> candidates, const Shape& s, const Tuning& t, const CostModel& m);
// The choice for a variant of a call's pattern (its root moved, or first
// since a barrier), decided beside the call's own: the same as choose(), but
// not counted in decision_counts(), which counts one decision per distinct call.
Choice choose_variant(const Shape& s, const Tuning& t, const CostModel& m);

// Why: e.g. "measured: two_level 1.2e-05 s beats the library's 1.6e-05 s beyond
// their spreads (3%, 4%) under built-in rule (0-inf:auto)". `s` and the
// Tuning behind c.rule must be those choose() saw.
std::string reason(const Choice& c, const Shape& s);

// Every algorithm of the collective with its predicted time and its source
// (measured, interpolated, extrapolated, fitted, default) or why it is not
// eligible, the rule in force, and the choice. For logs and `explain`.
std::string explain(const Shape& s, const Tuning& t, const CostModel& m);

// "8 ranks on 4 nodes (2 per node, node-consecutive), commutative op, in place".
std::string describe(const Shape& s);

// Decisions made by choose() in this process, by where the chosen time came
// from; forced ones (a rule naming one choice) apart.
struct DecisionCounts {
  std::array<uint64_t, source_count> by_source{};
  uint64_t forced = 0;
};
DecisionCounts decision_counts();
void reset_decision_counts();
// "measured 3, interpolated 12, fitted 0, default 0, forced 1"
std::string decision_counts_text(const DecisionCounts& d);

}  // namespace veneer::algorithms
