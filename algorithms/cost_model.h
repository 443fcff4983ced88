// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The cost model, in one place. Every candidate's predicted time (the
// library's included) comes from here, with where it came from:
//
//  1. measured: a calibrated profile (topology/profile.h) timed this
//     collective on a communicator of the same shape (ranks, nodes, ranks per
//     node) at this size; between two measured sizes the time is
//     interpolated linearly in log(size)-log(time), beyond the ladder
//     extrapolated from its last two points (algorithms/measured.h).
//     Other ranks: no points for this rank count, but the profile timed the
//     collective on several rank counts of one node and one algorithm led
//     the library on every one of them (select.cpp); taken on that agreement.
//  2. fitted: no points for this shape; the algorithms' alpha-beta-gamma
//     formulas with the profile's per-level fits (intra-node, inter-node).
//  3. default: no profile; the same formulas with the constants below.
//
// The selector (select.cpp) replaces the library only where the model's own
// uncertainty cannot reverse the ranking: measured times must differ by more
// than their measured spreads (beats_library); formula times by the margin of
// formula_margin (from the fits' measured error, or the built-in 0.8).
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>

namespace veneer::algorithms {

struct Shape;
struct Algorithm;
struct MeasuredTable;
struct MeasuredSeries;

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte sent
  double gamma = 0;  // seconds per byte reduced
};

struct CostModel {
  LinkCost intra{0.4e-6, 1.0 / 8e9, 1.0 / 6e9};   // shared memory within a node
  LinkCost inter{2.0e-6, 1.0 / 12e9, 1.0 / 6e9};  // the network between nodes
  int nic_streams = 4;                            // concurrent inter-node streams a node sustains at full speed each
  // An algorithm replaces the library only when predicted below this
  // fraction of the library's estimate: the model is rough, the library is tuned.
  double library_margin = 0.8;
  double oversubscribed_margin = 0.5;  // stricter when ranks share cores
  // The library runs the flat algorithms with its own tuning; a calibrated
  // profile may say it is slower (factor > 1) or faster than their formulas.
  double library_factor = 1.0;

  // From a calibrated profile (set_profile): which levels were fitted, and the
  // largest relative error of those fits.
  bool fitted_intra = false;
  bool fitted_inter = false;
  double fit_error = 0;
  std::shared_ptr<const MeasuredTable> measured;  // the profile's collective timings; null: none
};

const CostModel& default_cost_model();

// Where a predicted time comes from (see above). `extrapolated`: measured on
// this shape, but outside the measured sizes.
// `other_ranks`: not measured on this rank count, but on every rank count the
// profile timed on one node, and the pick agrees over all of them (select.cpp).
enum class Source : uint8_t { measured, interpolated, extrapolated, other_ranks, fitted, defaults };
inline constexpr int source_count = 6;
std::string_view source_name(Source s);  // "measured", ..., "default"

struct Prediction {
  double seconds = std::numeric_limits<double>::infinity();  // infinity: no prediction
  double spread = 0;                                         // relative, measured sources only
  Source source = Source::defaults;
  // Measured sources: slower than the library beyond behind_tolerance in
  // one of the conditions this call's pattern is scored by (at the measured
  // size, or at either measured size it is interpolated between).
  bool behind = false;
  bool known() const { return seconds < std::numeric_limits<double>::infinity(); }
  bool from_measurements() const { return source <= Source::other_ranks; }
};

// The profile's series for s's communicator shape and collective, or nullptr.
const MeasuredSeries* measured_series(const Shape& s, const CostModel& m);

// Predicted time of `a` (nullptr: the library) for s. With a series (from
// measured_series), its points only: unknown when the candidate has none
// there. Without, the formulas (fitted or default). No allocation.
Prediction predict(const Shape& s, const Algorithm* a, const CostModel& m, const MeasuredSeries* series);

// Whether `best` is faster than `library` beyond the model's uncertainty.
// Both measured (or inter/extrapolated from measurements):
//   best * (1 + max(spread_best, min_spread)) < library * (1 - max(spread_library, min_spread))
// with spreads capped at max_spread; otherwise best < formula_margin(s, m) * library.
bool beats_library(const Prediction& best, const Prediction& library, const Shape& s, const CostModel& m);
// At least 5% each way, so an algorithm must win by about 10%: the same
// choice moves by more than its within-launch spread between two launches,
// even pinned (a 4-rank allreduce of 512 B, ring: 6.48 us at calibration with
// a 1.2% spread, 10.5 us in the next launch's check, where the library kept
// 8.0). With 1%, three checks of one pinned profile read 94.9% within 1.10x,
// worst 1.33-1.48x, mean penalty 1.4-1.8%; with 5%, 97.4%, 1.17-1.19x, 0.5-0.9%.
inline constexpr double min_spread = 0.05;
// A candidate is taken only where it is not slower than the library by more
// than this in any condition the profile timed for the call's pattern (back
// to back, one call between barriers, either heap state), as well as faster
// in the slowest of them: scored by the slowest condition alone, Open MPI's
// 512 KiB-1 MiB reduce on 4 ranks took two_level, 1.8x faster than the
// library where the heap hands freed blocks back, and ran 0.86x of the
// library in a job whose heap kept them (12% behind it at calibration).
inline constexpr double behind_tolerance = 0.05;
// The first call since a barrier is timed alone, with the skew of the
// barrier's release in its time: there an algorithm must also be this much
// faster than the library. MPICH's 16 B broadcast on 4 ranks: binomial
// measured 0.11-0.17 us ahead of the library's 0.73-0.86 us between
// barriers at calibration, and ran at 0.75-0.99x of it in two checks.
inline constexpr double after_barrier_min_gain = 0.25e-6;
// A rank count above every one the profile timed on one node is decided by
// the agreement of those counts (Source::other_ranks) only where the lead at
// the largest of them is at least this: MPICH's allreduce of 512 KiB-1 MiB,
// `lanes` 1.11-1.38x ahead on 2-4 ranks and 1.20x on 4, ran 1.34x faster
// than the library on 6 ranks and 0.86x on 8.
inline constexpr double beyond_largest_min_lead = 1.25;
inline constexpr double max_spread = 0.5;
// The formulas' margin: the built-in library_margin (oversubscribed_margin
// when ranks share cores); with fitted levels (1 - e) / (1 + e) for the fits'
// error e, clamped to [0.5, 0.95], and no looser than oversubscribed_margin
// when oversubscribed.
double formula_margin(const Shape& s, const CostModel& m);

int ceil_log2(int64_t p);  // 0 for p <= 1
int floor_pow2(int p);     // largest power of two <= p
// Link of a flat algorithm's step between ranks `distance` apart (recursive
// doubling): within a node if every node is a run of a multiple of 2*distance
// ranks, else the network crowded by all of a node's ranks at once.
LinkCost link_at_distance(const Shape& s, const CostModel& m, int64_t distance);
// Link a flat algorithm's slowest step crosses, when one rank per node crosses at a time (rings, trees).
const LinkCost& flat_link(const Shape& s, const CostModel& m);
// The network when every rank of a node sends across at once (pairwise
// exchanges): beyond nic_streams, the node's ranks share its bandwidth.
LinkCost crowded_link(const Shape& s, const CostModel& m);

// The library's own estimate by formula: the best of the flat algorithms (the
// library has all of them), whatever their preconditions.
double library_seconds(const Shape& s, const CostModel& m);

}  // namespace veneer::algorithms
