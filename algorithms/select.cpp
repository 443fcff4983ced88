// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/select.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "algorithms/measured.h"
#include "algorithms/trial.h"

namespace veneer::algorithms {
namespace {

bool allows(const Rule* rule, std::string_view name) {
  return !rule || rule->choices.empty() ||
         std::find(rule->choices.begin(), rule->choices.end(), name) != rule->choices.end();
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3e s", s);
  return text;
}

std::string percent_text(double spread) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", spread * 100);
  return text;
}

// Between two measured sizes, the library is replaced only where the
// candidate beat it beyond both spreads at the measured sizes on either side
// (beats_library): where the two curves cross or touch in between,
// interpolation cannot say on which side of the crossing a size falls, and a
// protocol switch (a library's eager limit) can fall anywhere between two
// points. Allreduce at 256 KiB, between a 128 KiB point the library won and a
// 512 KiB point two_level won, ran 1.3-2.6x slower taken over. A tie on one
// side is not enough either: MPICH's allreduce of 16 KiB on 4 ranks, between
// 8 KiB (recursive_doubling 1.33x ahead) and 32 KiB (1.02x, within the
// spreads), interpolated at 1.16x, ran at 0.64 of the library forced in
// OSU's loop, and at 0.49-0.67 there taken, its trial's calls included
// (at 8 and 32 KiB it ran 1.5x and 1.3-1.6x ahead); Open MPI's of 4 KiB,
// between 2 KiB (tied) and 8 KiB (1.39x), at 0.97-1.02 forced and
// 0.95-1.03 taken.
bool ahead_on_both_sides(const Shape& s, const Algorithm* a, const CostModel& m, const MeasuredSeries& series) {
  const auto& sizes = series.bytes;
  const auto above = std::upper_bound(sizes.begin(), sizes.end(), s.bytes);
  if (above == sizes.begin() || above == sizes.end() || *(above - 1) == s.bytes) return true;
  for (int64_t bytes : {*(above - 1), *above}) {
    Shape at = s;
    at.bytes = bytes;
    const Prediction mine = predict(at, a, m, &series), library = predict(at, nullptr, m, &series);
    if (mine.known() && library.known() && !beats_library(mine, library, at, m)) return false;
  }
  return true;
}

std::string name_of(const Algorithm* a) { return a ? std::string(a->name) : std::string("library"); }

std::array<std::atomic<uint64_t>, source_count> g_by_source{};
std::atomic<uint64_t> g_forced{0};

void count(const Choice& c) {
  const bool forced = c.decision == Decision::forced || c.decision == Decision::forced_library ||
                      c.decision == Decision::forced_ineligible;
  if (forced) g_forced.fetch_add(1, std::memory_order_relaxed);
  else g_by_source[static_cast<size_t>(c.source)].fetch_add(1, std::memory_order_relaxed);
}

void take_library(Choice& c) {
  c.algorithm = nullptr;
  c.predicted_seconds = c.library_seconds;
  c.source = c.library_source;
  c.spread = c.library_spread;
}

void take(Choice& c, const Algorithm* a, const Prediction& p) {
  c.algorithm = a;
  c.predicted_seconds = p.seconds;
  c.source = p.source;
  c.spread = p.spread;
}

const Algorithm* named(std::span<const Algorithm* const> candidates, std::string_view name) {
  for (const Algorithm* a : candidates)
    if (a->name == name) return a;
  return nullptr;
}

// Where the profile has no points for s's rank count, on one node: the
// candidate measured ahead of the library beyond both spreads, and behind it
// in no condition of s's pattern, at s's size on every rank count the profile
// timed for the collective on one node (at least two; s's count at most twice
// the largest, as the libraries switch algorithms with the count). Of several,
// the one whose smallest lead is largest. Above the largest count timed, the
// lead there must also be beyond_largest_min_lead. The ladder of a 4-rank
// calibration is 2, 3 and 4 ranks; MPICH's broadcast with a moving root led
// by binomial 1.14-2.26x on all three then ran 1.36-2.60x faster than the
// library on 6 ranks and 1.46-3.28x on 8 (16 B-64 KiB).
struct OverRankCounts {
  const Algorithm* algorithm = nullptr;
  Prediction mine, library;  // on the nearest rank count
  int counts = 0, nearest_ranks = 0;
  double lead = 0;
};
OverRankCounts agreed_over_rank_counts(std::span<const Algorithm* const> candidates, const Shape& s, const Rule* rule,
                                       const CostModel& m) {
  OverRankCounts out;
  if (!m.measured || s.nodes != 1) return out;
  auto timed = [&](const MeasuredSeries& ser) { return ser.collective == s.collective && ser.nodes == 1; };
  int counts = 0, largest = 0;
  const MeasuredSeries* nearest = nullptr;
  for (const MeasuredSeries& ser : m.measured->series) {
    if (!timed(ser)) continue;
    ++counts;
    largest = std::max(largest, ser.ranks);
    if (!nearest || std::abs(ser.ranks - s.ranks) < std::abs(nearest->ranks - s.ranks)) nearest = &ser;
  }
  if (counts < 2 || s.ranks > 2 * largest) return out;
  for (const Algorithm* a : candidates) {
    if (!allows(rule, a->name) || !offered(*a, s)) continue;
    const size_t k = candidate_index(a);
    double lead = std::numeric_limits<double>::infinity();
    for (const MeasuredSeries& ser : m.measured->series) {
      if (!timed(ser)) continue;
      Shape at = s;
      at.ranks = at.min_ranks_per_node = at.max_ranks_per_node = ser.ranks;
      const Prediction mine = predict_measured(ser, k, s.bytes, s.moving_root, s.after_barrier);
      const Prediction library = predict_measured(ser, 0, s.bytes, s.moving_root, s.after_barrier);
      const bool ahead = mine.known() && library.known() && mine.source != Source::extrapolated &&
                         library.source != Source::extrapolated && !mine.behind &&
                         beats_library(mine, library, at, m) &&
                         (!s.after_barrier || mine.seconds + after_barrier_min_gain < library.seconds) &&
                         (mine.source != Source::interpolated || ahead_on_both_sides(at, a, m, ser));
      if (!ahead) {
        lead = 0;
        break;
      }
      lead = std::min(lead, library.seconds / mine.seconds);
      if (s.ranks > largest && ser.ranks == largest && library.seconds < beyond_largest_min_lead * mine.seconds) {
        lead = 0;
        break;
      }
    }
    if (lead > out.lead) {
      out.algorithm = a;
      out.lead = lead;
      out.mine = predict_measured(*nearest, k, s.bytes, s.moving_root, s.after_barrier);
      out.library = predict_measured(*nearest, 0, s.bytes, s.moving_root, s.after_barrier);
    }
  }
  if (out.algorithm) {
    out.counts = counts;
    out.nearest_ranks = nearest->ranks;
    out.mine.source = out.library.source = Source::other_ranks;
  }
  return out;
}

// The candidate fastest at s's size and pattern on one rank count the
// profile timed (`ser`), `other` left out, or null where none was measured there.
const Algorithm* fastest_on(const MeasuredSeries& ser, std::span<const Algorithm* const> candidates, const Shape& s,
                            const Rule* rule, const Algorithm* other = nullptr) {
  const Algorithm* fastest = nullptr;
  double seconds = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : candidates) {
    if (a == other || !allows(rule, a->name) || !offered(*a, s)) continue;
    const Prediction p = predict_measured(ser, candidate_index(a), s.bytes, s.moving_root, s.after_barrier);
    if (!p.known() || p.source == Source::extrapolated || p.seconds >= seconds) continue;
    fastest = a;
    seconds = p.seconds;
  }
  return fastest;
}

// Whether s's calls are above kFullTrialBytes (a rank's block where the
// shape counts every rank's: allgather, alltoall, reduce_scatter_block),
// as a trial counts a call's bytes (trial.cpp).
bool large_per_call(const Shape& s) {
  const bool per_rank = s.collective == Collective::allgather || s.collective == Collective::alltoall ||
                        s.collective == Collective::reduce_scatter_block;
  return (per_rank && s.ranks > 0 ? s.bytes / s.ranks : s.bytes) > kFullTrialBytes;
}

// Whether the formulas give `next` a time more than `factor` times
// shorter than `first`'s at s (any time where first's is unknown): whether
// a challenger is tried after `first` also where `first` took the shape.
bool predicted_ahead(const Shape& s, const Algorithm* next, const Algorithm* first, const CostModel& m, double factor) {
  const Prediction a = predict(s, first, m, nullptr);
  const Prediction b = predict(s, next, m, nullptr);
  return b.known() && (!a.known() || b.seconds * factor < a.seconds);
}

// Up to two challengers for s: the candidates fastest at s's size and
// pattern on the rank counts the profile timed for the collective on s's
// node count, nearest count first (the larger of two as near), the second
// the first leader of a farther count that differs from the first. One
// count's leader is often ahead of the next by its noise alone (MPICH's
// small allreduce at 4 ranks: rabenseifner and two_level within 4% of each
// other), and a count of another parity leads with another algorithm
// (Open MPI: recursive_doubling at 4 ranks, two_level at 3). Above
// kFullTrialBytes a call, where every count has one leader, the second is
// the runner-up of the nearest count: a large call's order in the profile
// changes from one launch to the next (offer_challenger), and a lone
// challenger that loses its trial leaves every later call to the library
// (MPICH's 1 MiB reduce from a rotating root on 6 ranks, a 4-rank profile:
// the model check's forced binomial 1.2x behind reduce_scatter_gather in
// one launch, 1.9x ahead of it in another).
std::array<const Algorithm*, 2> leaders_on_timed_counts(std::span<const Algorithm* const> candidates, const Shape& s,
                                                        const Rule* rule, const CostModel& m) {
  // Counts in order of nearness: distance, then the larger count first
  // (a key that grows along that order). Chosen without allocating.
  auto order = [&](const MeasuredSeries& ser) {
    return static_cast<long long>(std::abs(ser.ranks - s.ranks)) * (1LL << 32) - ser.ranks;
  };
  std::array<const Algorithm*, 2> out{};
  long long after = std::numeric_limits<long long>::min();
  const MeasuredSeries* nearest = nullptr;
  for (;;) {
    const MeasuredSeries* next = nullptr;
    for (const MeasuredSeries& ser : m.measured->series) {
      if (ser.collective != s.collective || ser.nodes != s.nodes || order(ser) <= after) continue;
      if (!next || order(ser) < order(*next)) next = &ser;
    }
    if (!next) break;
    after = order(*next);
    const Algorithm* a = fastest_on(*next, candidates, s, rule);
    if (!a || a == out[0]) continue;
    if (out[0]) {
      out[1] = a;
      break;
    }
    out[0] = a;
    nearest = next;
  }
  if (out[0] && !out[1] && large_per_call(s)) out[1] = fastest_on(*nearest, candidates, s, rule, out[0]);
  return out;
}

// Whether the profile timed s's collective, but not on s's shape (`series`:
// the measured series of s's shape, if any).
bool untimed(const Shape& s, const CostModel& m, const MeasuredSeries* series) {
  if (!m.measured || series) return false;
  return std::any_of(m.measured->series.begin(), m.measured->series.end(),
                     [&](const MeasuredSeries& ser) { return ser.collective == s.collective; });
}

// Calls up to this many bytes on a rank count the profile did not time
// try a third challenger whatever the formulas say of it (offer_challenger).
constexpr int64_t kEveryWayTriedBytes = int64_t{8} << 10;

// The slowest of a's times at s's size over every condition the profile
// timed it in: the fixed-root ones (back to back, the heap in either state,
// between barriers) and, where the root moved, the rotating one; infinite
// where unknown.
double worst_timed(const Shape& s, const Algorithm* a, const CostModel& m) {
  const MeasuredSeries* series = measured_series(s, m);
  if (!series) return std::numeric_limits<double>::infinity();
  const size_t k = candidate_index(a);
  const Prediction fixed = predict_measured(*series, k, s.bytes);
  const Prediction moved = s.moving_root ? predict_measured(*series, k, s.bytes, true) : fixed;
  return std::max(fixed.seconds, moved.seconds);
}

// Whether s's rank count is the largest the profile timed for s's
// collective on s's node count: the calibration's own job, every rank in
// each call (a smaller count is timed on a sub-communicator while the
// other ranks wait; a calibration of 4 ranks put the library 1.2x ahead of
// binomial for Open MPI's 16 B reduce after a barrier on 3 of them, and
// binomial ran 5x faster in a job of 3 ranks).
bool calibrated_job(const Shape& s, const CostModel& m) {
  int most = 0;
  for (const MeasuredSeries& ser : m.measured->series)
    if (ser.collective == s.collective && ser.nodes == s.nodes) most = std::max(most, ser.ranks);
  return most == s.ranks;
}

// Where the model kept the library on such a shape, the challengers to try
// against it: the leaders of the timed counts, nearest first, else the
// model's best.
void offer_challenger(Choice& c, std::span<const Algorithm* const> candidates, const Shape& s, const CostModel& m,
                      const Algorithm* second, double second_seconds) {
  if (c.decision != Decision::library_kept || !allows(c.rule, "library")) return;
  if (!c.untimed) {
    // A timed count: the fastest, where the library's lead over it is thin;
    // where it is not taken, the next fastest, where the library's lead
    // over that one is thin too. MPICH's reduce of 512 KiB first since a
    // barrier on 4 ranks, where a profile put the library 1.1x ahead of
    // reduce_scatter_gather and 1.35x ahead of two_level: the first lost
    // its trial, and two_level ran 1.9x faster than the library there.
    // Above kFullTrialBytes a call, the two go in the order of their
    // slowest time over every condition the profile timed: a trial there
    // runs few calls, the first taken, however thinly, leaves the second
    // untried, and a large call's time may change several times over from
    // one launch to the next. MPICH's 1 MiB reduce on 4 ranks, as
    // calibrated: reduce_scatter_gather 786 us and binomial 789 us from a
    // rotating root, 727 and 803 us after a barrier, 1,283 and 828 us back
    // to back; in the launches where the library's large calls ran its slow
    // way (1.5-1.9 ms), reduce_scatter_gather took the rotating root's calls
    // by 1.10x and ran 1.96-2.11x behind binomial, and lost its trial after
    // a barrier, where binomial then led by 1.6-2.3x.
    //
    // Not for calls of kFullTrialBytes or less that are each the first since
    // a barrier, on the calibration's own job (the largest count it timed,
    // every rank in the calls; a smaller one was timed on a
    // sub-communicator while the other ranks waited, and may not be the
    // job's pattern, below): the profile timed the library ahead in that very pattern,
    // and a trial there costs the job its lead of untimed calls and blocks
    // in which every call waits out the job's barrier, each through the
    // trial's own path. On 4 ranks over 2 cores, the profile's own count,
    // such challengers were taken in 0-1 of 57-58 small challenger trials a
    // model check under Open MPI and 4-8 of 44-50 under MPICH (5 of those 17
    // ahead of the library by more than 10% in the check's batches, 6
    // behind it); in OSU's timing loop, 2 and 1 of 57. Without them (two
    // launches each, alternated): OSU's shapes below 0.97 of the library
    // 35, 34 -> 32, 26 under Open MPI (geometric mean 1.011, 0.992 ->
    // 1.026, 1.005), 33, 43 -> 35, 30 under MPICH (1.059, 1.054 -> 1.071,
    // 1.065); the model check at 4 ranks 51 -> 53 of 56 within 1.10x
    // (Open MPI), 53 -> 49 (MPICH; the 8 KiB reduce binomial took, now
    // 1.13x behind it). Without them in every pattern: 70 -> 57 and
    // 75 -> 68 shapes below 0.97 in two launches, the check 106 -> 110 and
    // 103 -> 102 of 112 (docs/results.md, "What the trials cost in OSU's
    // loop").
    //
    // On a smaller count the profile timed, such a challenger is tried only
    // where the profile measured it ahead of the library there, however
    // thinly (within the spreads, or by less than after_barrier_min_gain).
    // With a 4-rank profile, such challengers on 2 and 3 ranks lost 51 of 51
    // and 54 of 55 trials in the model check under Open MPI (the one taken,
    // 1.14x, had been measured ahead), and the calls of those measured
    // behind cost OSU's loop of small calls: on 3 ranks, Open MPI's 8-64 B reduce
    // read 0.83-0.84 of the library with them and 0.87 without (ten launches
    // each, medians), MPICH's 8 B-4 KiB broadcast 0.57-0.89 and 0.92-1.01
    // (eight); on 2 ranks, MPICH's shapes read alike.
    const bool between_barriers = !large_per_call(s) && s.after_barrier && !s.moving_root;
    const double lead_asked = between_barriers ? 1.0 : kThinLead;
    if (m.measured && c.best && c.best_seconds > 0 && c.library_seconds > 0 &&
        (!between_barriers || !calibrated_job(s, m)) && c.best_seconds < lead_asked * c.library_seconds) {
      c.challenger = c.best;
      c.thin_lead = true;
      if (second && second != c.best && second_seconds < lead_asked * c.library_seconds) {
        c.next_challenger = second;
        if (large_per_call(s) && worst_timed(s, second, m) < worst_timed(s, c.best, m))
          std::swap(c.challenger, c.next_challenger);
      }
    }
    return;
  }
  const auto leaders = leaders_on_timed_counts(candidates, s, c.rule, m);
  c.challenger = leaders[0] ? leaders[0] : c.best;
  c.next_challenger = leaders[1];
  // A challenger taken stands against the next only where the formulas give
  // the next the lead a trial asks of it (10%, trial.cpp): on the 2-host
  // cluster (6 ranks), two_level took the
  // 512 KiB allgather from the library at 2.3 ms against 6.2, and bruck,
  // next, predicted 4x slower than two_level there, ran 6 ms a call in its
  // trial; binomial took the 512 KiB broadcast from a moving root where
  // two_level, predicted 2.8x faster, ran 2x faster still. Above
  // kFullTrialBytes a call, any lead the formulas give the next will do:
  // there the first taken holds every later call of the job, and a trial
  // the next cannot win stops after its first pair. MPICH's 1 MiB reduce
  // first since a barrier on 6 ranks (a 4-rank profile): two_level
  // predicted 5% ahead of reduce_scatter_gather, which took the calls from
  // the library at 1.2x and ran 1.66x behind two_level in the model check.
  if (c.challenger && c.next_challenger)
    c.next_against_first = predicted_ahead(s, c.next_challenger, c.challenger, m, large_per_call(s) ? 1.0 : 1.10);
  // The leaders of other counts are not always the ones that lead on this
  // one: on the 2-host cluster at 6 ranks (a profile of 2 x 2), the
  // formulas' best led the library by 1.2-2.6x where neither leader did
  // (lanes for the allreduce of 64 KiB-1 MiB, node_aware for the alltoall
  // of 2-170 B per rank, two_level for the broadcast of 16-128 B after a
  // barrier).
  if (c.best && !c.best_behind && c.best != c.challenger && c.best != c.next_challenger &&
      c.best_seconds * 1.10 < c.library_seconds)
    c.third_challenger = c.best;
  if (c.third_challenger || !c.challenger || s.bytes > kEveryWayTriedBytes) return;
  // Small calls: the fastest by the formulas of those neither leader is,
  // whatever its lead. The formulas fit times of large calls; on 5 ranks
  // over 2 cores (Open MPI, a 4-rank profile) they put two_level's
  // allgather of 3-25 B a rank after a barrier 2.3x behind the library,
  // and it ran 1.1-1.3x ahead of it, with bruck and ring tried and not
  // taken. A trial of calls this small costs the job a few microseconds.
  double fastest = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : candidates) {
    if (a == c.challenger || a == c.next_challenger || !allows(c.rule, a->name) || !offered(*a, s)) continue;
    const Prediction p = predict(s, a, m, nullptr);
    if (p.known() && p.seconds < fastest) {
      fastest = p.seconds;
      c.third_challenger = a;
    }
  }
}

// The model's choice on a timed count, ahead of the library by less than kThinLead.
bool model_leads_thinly(const Choice& c) {
  return c.decision == Decision::model && !c.untimed && c.library_seconds > 0 && c.predicted_seconds > 0 &&
         c.library_seconds < kThinLead * c.predicted_seconds;
}

// The candidates' second fastest, as decide() ranks them.
struct Runner {
  const Algorithm* algorithm = nullptr;
  double seconds = std::numeric_limits<double>::infinity();
  // `a`, timed `p`, before the fastest so far (`best`, timed `best_time`) is replaced by it where it is faster.
  void offer(const Algorithm* a, const Prediction& p, const Algorithm* best, const Prediction& best_time) {
    const Algorithm* slower = p.seconds < best_time.seconds ? best : a;
    const double t = p.seconds < best_time.seconds ? best_time.seconds : p.seconds;
    if (slower && t < seconds) {
      algorithm = slower;
      seconds = t;
    }
  }
  // This one, or `a` timed `t` where that is faster.
  Runner or_faster(const Algorithm* a, double t) const {
    return a && t < seconds ? Runner{.algorithm = a, .seconds = t} : *this;
  }
  // The runner-up to c (Choice::runner_up): on a count the profile timed
  // (`measured`), behind the model's choice by less than kThinLead, where
  // that choice's lead over the library is not itself thin. Not where the
  // root moved: there a trial of two of Veneer's algorithms misjudged them
  // (under MPICH on 2 ranks, two_level's 1 MiB reduce from a rotating root
  // led binomial by 2.3x in its trial and ran 2.1x slower than it in the
  // model check), and blocks that time every root alike misjudged the
  // library against binomial on 3 ranks instead.
  const Algorithm* thinly_behind(const Choice& c, const Shape& s, bool measured) const {
    const bool thin = c.decision == Decision::model && measured && !c.untimed && !c.thin_lead && !s.moving_root &&
                      algorithm && seconds < kThinLead * c.predicted_seconds;
    return thin ? algorithm : nullptr;
  }
};

// Choice::fallback: where the model chose an algorithm, the fastest of the
// others (`second`, or `behind`, the fastest of those left out as behind
// the library in a condition), where the library's lead over it is thin.
const Algorithm* fallback_of(const Choice& c, const Runner& second, const Algorithm* behind,
                             const Prediction& behind_time) {
  const bool behind_first = behind && behind_time.seconds < second.seconds;
  const Algorithm* next = behind_first ? behind : second.algorithm;
  const double seconds = behind_first ? behind_time.seconds : second.seconds;
  if (c.decision != Decision::model || !next || next == c.algorithm) return nullptr;
  return seconds < kThinLead * c.library_seconds ? next : nullptr;
}

// The next fastest after c.best: of those left out as behind the library
// in a condition where c.best is one of them (`second_behind`), else of
// the others (`second`) and the fastest left out (`behind`).
Runner after_best(const Choice& c, const Runner& second, const Runner& second_behind, const Algorithm* behind,
                  double behind_seconds) {
  return c.best_behind ? second_behind : second.or_faster(behind, behind_seconds);
}

// choose_among() without counting (explain() uses it too).
Choice decide(std::span<const Algorithm* const> candidates, const Shape& s, const Tuning& t, const CostModel& m) {
  Choice c;
  c.rule = t.rule_for(s.collective, s.bytes, &c.rule_from_user);
  const Rule* rule = c.rule;
  // Measured points for this shape, if the library's own time is among them.
  const MeasuredSeries* series = measured_series(s, m);
  c.untimed = untimed(s, m, series);
  Prediction library = predict(s, nullptr, m, series);
  if (series && !library.known()) {
    series = nullptr;
    library = predict(s, nullptr, m, nullptr);
  }
  auto set_library = [&](const Prediction& p) {
    c.library_seconds = p.seconds;
    c.library_source = p.source;
    c.library_spread = p.spread;
  };
  set_library(library);

  if (rule && rule->choices.size() == 1) {
    const Algorithm* forced = named(candidates, rule->choices[0]);
    if (!forced) {
      c.decision = Decision::forced_library;
      take_library(c);
    } else if (eligible(*forced, s)) {
      Prediction p = predict(s, forced, m, series);
      if (!p.known()) p = predict(s, forced, m, nullptr);
      c.decision = Decision::forced;
      take(c, forced, p);
    } else {
      c.decision = Decision::forced_ineligible;
      c.best = forced;
      take_library(c);
    }
    return c;
  }

  const Algorithm* best = nullptr;
  Prediction best_time;
  Runner second;                           // the next fastest
  const Algorithm* best_behind = nullptr;  // the fastest of those left out
  Prediction best_behind_time;
  Runner second_behind;  // the next fastest of those left out
  for (;;) {
    for (const Algorithm* a : candidates) {
      if (!allows(rule, a->name) || !offered(*a, s)) continue;
      const Prediction p = predict(s, a, m, series);
      if (!p.known()) continue;
      // Measured slower than the library in one of this pattern's
      // conditions: never taken, however fast in the others.
      if (p.behind && allows(rule, "library")) {
        ++c.behind_left_out;
        second_behind.offer(a, p, best_behind, best_behind_time);
        if (p.seconds < best_behind_time.seconds) {
          best_behind = a;
          best_behind_time = p;
        }
        continue;
      }
      second.offer(a, p, best, best_time);
      if (p.seconds < best_time.seconds) {
        best = a;
        best_time = p;
      }
    }
    if (best || !series || c.behind_left_out > 0) break;
    // No allowed algorithm was measured on this shape: compare formulas with formulas.
    series = nullptr;
    library = predict(s, nullptr, m, nullptr);
    set_library(library);
  }
  // No points for this rank count: an algorithm that led the library on
  // every rank count the profile timed is taken on that agreement.
  if (!series && allows(rule, "library")) {
    const OverRankCounts o = agreed_over_rank_counts(candidates, s, rule, m);
    if (o.algorithm) {
      set_library(o.library);
      c.from_measurements = true;
      c.best = o.algorithm;
      c.best_seconds = o.mine.seconds;
      c.rank_counts = o.counts;
      c.nearest_ranks = o.nearest_ranks;
      c.lead = o.lead;
      c.decision = Decision::model;
      take(c, o.algorithm, o.mine);
      return c;
    }
  }
  c.from_measurements = series != nullptr;
  c.best = best;
  c.best_seconds = best_time.seconds;
  if (!best && best_behind) {
    c.decision = Decision::library_kept;
    c.best = best_behind;
    c.best_seconds = best_behind_time.seconds;
    c.best_behind = true;
    take_library(c);
  } else if (!best) {
    c.decision = Decision::no_eligible;
    take_library(c);
  } else if (allows(rule, "library") && !beats_library(best_time, library, s, m)) {
    c.decision = Decision::library_kept;
    take_library(c);
  } else if (allows(rule, "library") && s.after_barrier && series &&
             best_time.seconds + after_barrier_min_gain >= library.seconds) {
    c.decision = Decision::library_kept;
    c.within_barrier_skew = true;
    take_library(c);
  } else if (allows(rule, "library") && series && best_time.source == Source::interpolated &&
             !ahead_on_both_sides(s, best, m, *series)) {
    c.decision = Decision::library_kept;
    c.lost_at_a_neighbour = true;
    take_library(c);
  } else {
    c.decision = Decision::model;
    take(c, best, best_time);
  }
  if (!c.from_measurements) c.margin = formula_margin(s, m);
  c.thin_lead = model_leads_thinly(c);
  c.runner_up = second.thinly_behind(c, s, series != nullptr);
  c.fallback = fallback_of(c, second, best_behind, best_behind_time);
  const Runner next = after_best(c, second, second_behind, best_behind, best_behind_time.seconds);
  offer_challenger(c, candidates, s, m, next.algorithm, next.seconds);
  return c;
}

}  // namespace

Choice choose(const Shape& s, const Tuning& t, const CostModel& m) {
  return choose_among(algorithms_for(s.collective), s, t, m);
}

bool try_first(Choice& c, const Algorithm* a, const Shape& s, const CostModel& m) {
  if (!a || c.algorithm || c.decision != Decision::library_kept || !allows(c.rule, "library") || c.challenger == a ||
      !allows(c.rule, a->name) || !offered(*a, s))
    return false;
  // `a`, then the challengers named, each once, three at most (what a
  // decision queues: Remembered::next_challenger).
  const std::array<const Algorithm*, 4> order{a, c.challenger, c.next_challenger, c.third_challenger};
  std::array<const Algorithm*, 3> queue{};
  size_t n = 0;
  for (const Algorithm* x : order)
    if (x && n < queue.size() &&
        std::find(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(n), x) ==
            queue.begin() + static_cast<std::ptrdiff_t>(n))
      queue[n++] = x;
  c.challenger = queue[0];
  c.next_challenger = queue[1];
  // The first challenger named, where `a` was not taken; above
  // kFullTrialBytes a call, also against `a` where it was, where the
  // formulas give the challenger any lead over it (offer_challenger): under
  // Open MPI on 6 ranks (a profile of 2-4), two_level took the 256-512 KiB
  // allreduce after a barrier from the library on its win beside them, and
  // lanes, untried, ran 1.13-1.34x ahead of it in the model check.
  c.next_against_first = c.next_challenger && large_per_call(s) && predicted_ahead(s, c.next_challenger, a, m, 1.0);
  c.third_challenger = queue[2];
  return true;
}

Choice choose_among(std::span<const Algorithm* const> candidates, const Shape& s, const Tuning& t, const CostModel& m) {
  Choice c = decide(candidates, s, t, m);
  count(c);
  return c;
}

Choice choose_variant(const Shape& s, const Tuning& t, const CostModel& m) {
  return decide(algorithms_for(s.collective), s, t, m);
}

std::string reason(const Choice& c, const Shape& s) {
  std::string rule = "no rule";
  if (c.rule) {
    rule = c.rule_from_user ? std::string(override_variable(s.collective)) : std::string("built-in rule");
    rule += " (" + c.rule->text + ")";
  }
  const std::string source(source_name(c.from_measurements ? c.library_source : c.source));
  const std::string left_out = c.behind_left_out > 0 ? "; left out, as slower than the library in a condition " +
                                                           std::string("timed for this pattern: ") +
                                                           std::to_string(c.behind_left_out) + " more"
                                                     : "";
  switch (c.decision) {
    case Decision::forced: return "forced by " + rule;
    case Decision::forced_library: return "library forced by " + rule;
    case Decision::forced_ineligible: {
      std::string why = "not eligible";
      if (c.best) eligible(*c.best, s, &why);
      return name_of(c.best) + " forced by " + rule + " but " + why + ": library";
    }
    case Decision::no_eligible: return "no eligible algorithm under " + rule + ": library";
    case Decision::library_kept:
      if (c.best_behind)
        return "measured times under " + rule + ": best, " + name_of(c.best) + " at " + seconds_text(c.best_seconds) +
               " against the library's " + seconds_text(c.library_seconds) +
               ", but it and every other eligible algorithm slower than the library in a condition timed for this " +
               "pattern (back to back, between barriers, a heap handing blocks back): library";
      if (c.lost_at_a_neighbour)
        return "measured times under " + rule + ": " + name_of(c.best) + " interpolated at " +
               seconds_text(c.best_seconds) + " against the library's " + seconds_text(c.library_seconds) +
               ", but not ahead of the library beyond the spreads at a measured size on either side " +
               "(the curves cross or touch): library";
      if (c.within_barrier_skew)
        return "measured times under " + rule + ": best, " + name_of(c.best) + " at " + seconds_text(c.best_seconds) +
               " against the library's " + seconds_text(c.library_seconds) +
               ", less than a barrier's skew ahead (0.25 us) for a call after a barrier: library";
      if (c.from_measurements)
        return "measured times under " + rule + ": best, " + name_of(c.best) + " at " + seconds_text(c.best_seconds) +
               ", not faster than the library's " + seconds_text(c.library_seconds) + " (" + source +
               ") beyond their spreads" + left_out;
      {
        char margin[16];
        std::snprintf(margin, sizeof margin, "%.2f", c.margin);
        return "cost model (" + source + ") under " + rule + ": best, " + name_of(c.best) + " at " +
               seconds_text(c.best_seconds) + ", not below " + margin + " x the library's estimate " +
               seconds_text(c.library_seconds);
      }
    case Decision::model: {
      if (c.rank_counts > 0) {
        char lead[16];
        std::snprintf(lead, sizeof lead, "%.2fx", c.lead);
        return "not measured on this rank count; under " + rule + ", " + name_of(c.algorithm) +
               " led the library beyond their spreads on all " + std::to_string(c.rank_counts) +
               " rank counts timed on one node, by " + lead + " at least (" + seconds_text(c.predicted_seconds) +
               " against " + seconds_text(c.library_seconds) + " on " + std::to_string(c.nearest_ranks) + " ranks)";
      }
      if (!allows(c.rule, "library"))
        return std::string(source_name(c.source)) + " times under " + rule +
               " (the library not allowed): " + name_of(c.algorithm) + " at " + seconds_text(c.predicted_seconds);
      return std::string(source_name(c.source)) + " times under " + rule + ": " + name_of(c.algorithm) + " at " +
             seconds_text(c.predicted_seconds) + (c.from_measurements ? " (±" + percent_text(c.spread) + ")" : "") +
             " beats the library's " + seconds_text(c.library_seconds) +
             (c.from_measurements ? " (±" + percent_text(c.library_spread) + ")" : "") + left_out;
    }
  }
  return "";
}

std::string describe(const Shape& s) {
  std::string d = std::string(collective_name(s.collective)) + ", " + std::to_string(s.bytes) + " bytes, " +
                  std::to_string(s.ranks) + " ranks on " + std::to_string(s.nodes) + " node" +
                  (s.nodes == 1 ? "" : "s") + " (";
  d += s.equal_ranks_per_node
           ? std::to_string(s.max_ranks_per_node) + " per node"
           : std::to_string(s.min_ranks_per_node) + "-" + std::to_string(s.max_ranks_per_node) + " per node";
  d += s.node_consecutive ? ", node-consecutive)" : ", not node-consecutive)";
  d += s.commutative ? "" : ", non-commutative op";
  if (!s.predefined_op) d += ", user op";
  if (s.in_place) d += ", in place";
  if (s.oversubscribed) d += ", oversubscribed";
  return d;
}

std::string explain(const Shape& s, const Tuning& t, const CostModel& m) {
  std::string out = describe(s) + "\n";
  const MeasuredSeries* series = measured_series(s, m);
  if (series && !predict(s, nullptr, m, series).known()) series = nullptr;
  auto line = [&](const Algorithm* a) {
    Prediction p = predict(s, a, m, series);
    std::string note;
    if (!p.known()) {
      p = predict(s, a, m, nullptr);
      note = ", not measured on this shape";
    }
    const std::string spread = p.from_measurements() ? " ±" + percent_text(p.spread) : "";
    char text[256];
    std::snprintf(text, sizeof text, "  %-22s predicted %s  %s%s%s\n", name_of(a).c_str(),
                  seconds_text(p.seconds).c_str(), std::string(source_name(p.source)).c_str(), spread.c_str(),
                  note.c_str());
    return std::string(text);
  };
  out += line(nullptr);
  for (const Algorithm* a : algorithms_for(s.collective)) {
    std::string why;
    if (offered(*a, s, &why)) {
      out += line(a);
    } else {
      char text[256];
      std::snprintf(text, sizeof text, "  %-22s %s%s\n", std::string(a->name).c_str(),
                    eligible(*a, s) ? "" : "not eligible: ", why.c_str());
      out += text;
    }
  }
  const Choice c = decide(algorithms_for(s.collective), s, t, m);  // explaining is not deciding: not counted
  out += "chosen: " + name_of(c.algorithm) + " (" + reason(c, s) + ")\n";
  // The challengers to a library kept thinly (offer_challenger), for c or a variant of it.
  auto thin_challengers = [](const Choice& k, const char* indent) {
    if (!k.challenger || !k.thin_lead) return std::string();
    return indent + ("the library kept, " + name_of(k.challenger)) +
           " within 1.5x of it: unless VENEER_TRIAL=0, the job's first calls try it against the library (taken "
           "only if it leads by more than 10%" +
           (k.next_challenger ? "; where it is not, then " + name_of(k.next_challenger) + ", also within 1.5x"
                              : std::string()) +
           ")\n";
  };
  out += thin_challengers(c, "");
  // The challengers tried on a rank count the profile did not time (offer_challenger), for c or a variant of it.
  auto untimed_challengers = [](const Choice& k, const char* indent) {
    if (!k.untimed || !(k.challenger || k.decision == Decision::model)) return std::string();
    return indent +
           ("not timed on this rank count: unless VENEER_TRIAL=0, the job's first calls try " +
            name_of(k.challenger ? k.challenger : k.algorithm)) +
           " against the library (" +
           (k.challenger ? "taken only if it leads by more than 10%"
                         : "kept unless the library leads by more than 10%") +
           (!k.next_challenger     ? std::string()
            : k.next_against_first ? "; then " + name_of(k.next_challenger) +
                                         ", against the library where it was not taken and against it where it was"
                                   : "; where it does not, then " + name_of(k.next_challenger)) +
           (k.third_challenger ? "; last " + name_of(k.third_challenger) +
                                     (k.third_challenger == k.best ? ", the formulas' best" : ", the formulas' next") +
                                     ", against the library or the one taken"
                               : std::string()) +
           ")\n";
  };
  out += untimed_challengers(c, "");
  const bool large = large_per_call(s);
  const bool tried_large =
      c.decision == Decision::model && c.algorithm && !c.thin_lead && !c.untimed && large && !s.moving_root;
  if (tried_large)
    out += "above 64 KiB a call, unless VENEER_TRIAL=0, the job's first calls try " + name_of(c.algorithm) +
           " against the library whatever its lead (kept unless the library leads by more than 10%)\n";
  if (c.runner_up)
    out += name_of(c.runner_up) + " within 1.5x of " + name_of(c.algorithm) +
           ": unless VENEER_TRIAL=0, the job's first calls try it against " + name_of(c.algorithm) +
           (tried_large ? " where that is kept, and against the library where it is returned" : std::string()) +
           " (taken only if it leads by more than 10%)\n";
  if (c.fallback && (c.thin_lead || c.untimed || tried_large) && !(tried_large && c.runner_up))
    out += "where the job's first calls return " + name_of(c.algorithm) + " to the library, " + name_of(c.fallback) +
           ", the next fastest, is tried against it (taken only if it leads by more than 10%)\n";
  // A rooted call whose root moved since the previous one is decided apart.
  if ((s.collective == Collective::bcast || s.collective == Collective::reduce) && !s.moving_root) {
    Shape moved = s;
    moved.moving_root = true;
    const Choice mc = decide(algorithms_for(s.collective), moved, t, m);
    out += "root moved since the previous call: " + name_of(mc.algorithm) + " (" + reason(mc, moved) + ")\n" +
           thin_challengers(mc, "  ") + untimed_challengers(mc, "  ");
  }
  // So is the first call since a barrier on the communicator.
  if (!s.moving_root && !s.after_barrier) {
    Shape fresh = s;
    fresh.after_barrier = true;
    const Choice fc = decide(algorithms_for(s.collective), fresh, t, m);
    out += "first call since a barrier: " + name_of(fc.algorithm) + " (" + reason(fc, fresh) + ")\n" +
           thin_challengers(fc, "  ") + untimed_challengers(fc, "  ");
  }
  return out;
}

DecisionCounts decision_counts() {
  DecisionCounts d;
  for (size_t i = 0; i < d.by_source.size(); ++i) d.by_source[i] = g_by_source[i].load(std::memory_order_relaxed);
  d.forced = g_forced.load(std::memory_order_relaxed);
  return d;
}

void reset_decision_counts() {
  for (auto& n : g_by_source) n.store(0, std::memory_order_relaxed);
  g_forced.store(0, std::memory_order_relaxed);
}

std::string decision_counts_text(const DecisionCounts& d) {
  std::string out;
  for (int i = 0; i < source_count; ++i) {
    out += i ? ", " : "";
    out += source_name(static_cast<Source>(i));
    out += ' ';
    out += std::to_string(d.by_source[static_cast<size_t>(i)]);  // (appended apart: GCC 12 warns falsely on + chains)
  }
  out += ", forced ";
  out += std::to_string(d.forced);
  return out;
}

}  // namespace veneer::algorithms
