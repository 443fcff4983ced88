// SPDX-License-Identifier: BSD-3-Clause
// Trials of the model's collective choices on the application's own calls
// (trial.h).
#include "algorithms/trial.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <vector>

#include "algorithms/admission.h"
#include "algorithms/cost_model.h"
#include "algorithms/execution.h"
#include "algorithms/report.h"
#include "datatypes/decode.h"
#include "support/config.h"
#include "support/log.h"

namespace veneer::algorithms {
namespace {

// The call's decision key without what may differ between ranks (the
// communicator is the book's own), plus the pattern and the choice.
struct TrialKey {
  DecisionKey call;
  uint8_t condition = 0;
  const Algorithm* algorithm = nullptr;
  const Algorithm* opponent = nullptr;  // nullptr: the library
  TrialRole role = TrialRole::model;
  bool operator==(const TrialKey&) const = default;
};

struct Trial {
  TrialKey key;
  int calls = 0;        // calls of this key so far, on every rank alike
  int block_calls = 0;  // calls per block (block_calls_for)
  int untimed = 1;      // of them, the first ones, not timed (untimed_calls_for)
  int warm_calls = 0;   // untimed calls of each side before the first block (warm_calls_for)
  int lead_calls = 0;   // untimed calls of the first side before those (lead_calls_for)
  int pairs = 0;        // block pairs the trial runs (blocks of each side)
  Verdict verdict = Verdict::trying;
  double lead = 0;                    // at the verdict: the opponent's median block over the algorithm's
  double block = 0;                   // seconds of the current block so far
  std::vector<double> mine, library;  // seconds per finished block
  // Seconds of each timed call of each side on this rank, first since a
  // barrier (condition 2) only (not_behind_on_the_mean).
  std::vector<double> mine_calls, library_calls;
};

// Timed calls a block of t's.
double timed_calls(const Trial& t) { return t.block_calls - t.untimed; }

// Calls run in blocks of this many on one side; the first call of a block
// is not timed. A call's own time on a rank includes waiting for ranks the
// previous call left behind (a broadcast's root returns at once; the next
// call waits for it to catch up), so timed one call at a time, each side
// would be charged the other's lag. Within a block the lag a call leaves
// falls on a call of the same side, and the block's first call absorbs the
// lag of the block before. Above kFullTrialBytes a call, blocks of two: the
// lag is a small part of such a call, and every call of a slower side costs
// the job as much as hundreds of small ones; one more untimed call before
// them where the root does not rotate (untimed_calls_for).
constexpr int kBlock = 4;
constexpr int kLargeBlock = 2;
// The library takes the shape back only where it led by more than this:
// the model's choice rests on the calibration's many calls, a trial on a
// few of the job's, so a near tie keeps the choice and a trial overturns
// it where the model was clearly wrong for this pattern. A challenger must
// lead the library by as much to take the shape: a near tie stays with the
// library.
constexpr double kOverturn = 1.10;
// On the ranks' mean, what a thin lead (or a challenger to one) that leads
// on the slowest rank by more than kOverturn may trail by and still be
// kept: the mean's own noise between blocks. Under MPICH on 4 ranks over 2
// cores, recursive_halving's 32 B reduce_scatter_block after a barrier led
// the library by 1.36x on the slowest rank and trailed it by 1.3% on the
// mean, bruck's 4 B alltoall by 1.04x and 0.1%; both were returned to the
// library, which the model check then timed 1.14-1.17x behind them.
constexpr double kMeanTie = 1.03;

// A communicator's trials. Collective calls on one communicator come in one
// order on every rank (MPI leaves it to the application to order them across
// threads), so the lock only guards the list against another thread's
// lookup; no MPI call is made while it is held.
//
// `neighbours`: what neighbours_winner() answered for each shape it was
// asked about, given again on every later asking.
struct NeighbourAnswer {
  DecisionKey call;
  uint8_t condition = 0;
  const Algorithm* winner = nullptr;
};
struct TrialBook {
  std::mutex lock;
  std::vector<Trial> trials;
  std::vector<NeighbourAnswer> neighbours;
  TrialBook() = default;
  TrialBook(const TrialBook&) = delete;
  TrialBook& operator=(const TrialBook&) = delete;
  // A communicator freed while a trial after a barrier ran: its barriers
  // need no more timing for it.
  ~TrialBook() {
    for (const Trial& t : trials)
      if (t.key.condition == 2 && t.verdict == Verdict::trying)
        g_barrier_trials.fetch_sub(1, std::memory_order_relaxed);
  }
};

// The last barrier timed on this thread (note_barrier_seconds), until a
// trial's call on its communicator counts it.
struct BarrierSeconds {
  MPI_Comm comm = MPI_COMM_NULL;
  double seconds = 0;
};
thread_local BarrierSeconds t_barrier;

// Seconds of the barrier on comm just before this call (0: none timed).
double barrier_before(MPI_Comm comm) {
  if (t_barrier.comm != comm) return 0;
  const double s = t_barrier.seconds;
  t_barrier = {};
  return s;
}
// More distinct shapes than this on one communicator are not tried (every
// rank meets the same shapes in the same order, so all stop at the same one).
constexpr size_t kMaxTrials = 512;
// How far apart in bytes (either way) a trial's shape may be from a shape
// that neighbours_winner() answers for: the calibration's ladder of sizes
// steps by 8x.
constexpr double kNeighbourSpan = 8;

// How far apart in bytes (either way) a trial's shape may be from one
// whose trial of the same algorithm it is spared (lost_beside): the next
// size up or down of a sweep that doubles (OSU's), never the calibration's
// ladder (8x).
constexpr double kLostSpan = 2;

std::mutex g_books_lock;  // making a hierarchy's book
std::atomic<uint64_t> g_kept{0}, g_dropped{0}, g_taken{0}, g_not_taken{0}, g_spared{0}, g_calls{0}, g_barriers{0};

// Trials ended with both sides' medians (trial_records()), the last kMaxRecords.
constexpr size_t kMaxRecords = 256;
std::mutex g_records_lock;
std::vector<TrialRecord> g_records;

TrialBook& book_of(const Hierarchy& h) {
  std::lock_guard<std::mutex> guard(g_books_lock);
  if (!h.trials) h.trials = std::make_shared<TrialBook>();
  return *static_cast<TrialBook*>(h.trials.get());
}

bool named(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return true;
  auto combiner = datatypes::combiner_of(t);
  return combiner && *combiner == MPI_COMBINER_NAMED;
}

// The call's decision key as every rank of the communicator has it: not
// the root (a rotating root is one shape), nor MPI_IN_PLACE (a reduce's
// root's alone), nor the send side of an in-place allgather or alltoall
// (not read, and may differ between ranks).
DecisionKey shape_key(const Call& c) {
  // A broadcast's, allgather's or alltoall's types and counts may differ
  // between ranks; its bytes do not (agreed_call).
  DecisionKey k = decision_key(moves_bytes(c.collective) ? agreed_call(c) : c, MPI_COMM_NULL);
  k.root = 0;
  k.in_place = false;
  if (c.sbuf == MPI_IN_PLACE) {
    k.stype = MPI_DATATYPE_NULL;
    k.scount = 0;
  }
  return k;
}

TrialKey key_of(const Call& c, uint8_t condition, const Algorithm& a, const Algorithm* opponent, TrialRole role) {
  return {.call = shape_key(c), .condition = condition, .algorithm = &a, .opponent = opponent, .role = role};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  return m;
}

const char* condition_name(uint8_t condition) {
  return condition == 1 ? ", root moved" : condition == 2 ? ", first since a barrier" : "";
}

// Tests' handicaps (handicap_for_testing): a few sides, each with its
// seconds; the flag spares the lock where there are none.
struct Handicap {
  const Algorithm* side = nullptr;
  double seconds = 0;
};
std::mutex g_handicaps_lock;
std::array<Handicap, 4> g_handicaps;  // the first g_handicap_count
size_t g_handicap_count = 0;
std::atomic<bool> g_handicapped{false};

double handicap_of(const Algorithm* a) {
  if (!g_handicapped.load(std::memory_order_relaxed)) [[likely]]
    return 0;
  std::lock_guard<std::mutex> guard(g_handicaps_lock);
  for (size_t i = 0; i < g_handicap_count; ++i)
    if (g_handicaps[i].side == a) return g_handicaps[i].seconds;
  return 0;
}

// Runs the call by `a` (nullptr: the library), timed; counted as the report counts calls.
int timed(const Algorithm* a, const Call& c, const Hierarchy& h, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  const int rc = a ? execute(*a, c, h) : run_library(c, h.parent);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *seconds += handicap_of(a);
  count_call(c.collective, a);
  return rc;
}

// The end of a trial: each block's time on the slowest rank (one allreduce
// on the communicator, inside this collective call, on every rank alike),
// and each side's median of those. The model's choice stays unless the
// library's median led by more than kOverturn (a thin lead's: unless it led
// at all). A challenger takes the shape
// only where its median led by more than kOverturn (kDecisive in a trial of
// fewer than four pairs), it won at least
// kChallengerWins of the block pairs (each of its blocks against the
// library's next to it in time), and, on the first calls since a barrier,
// it gained at least after_barrier_min_gain a call: on 5-6 ranks over 2
// cores, a median alone let small broadcasts between barriers go to
// binomial at 0.6-0.9x of the library.
// Each side's finished blocks (as many of each: the fewer, the same on every
// rank), each as long as on the slowest rank: one allreduce on the
// communicator, inside this collective call, on every rank alike. False
// where the library failed it (on every rank or on none).
bool blocks_over_ranks(const Trial& t, const Hierarchy& h, std::vector<double>* mine, std::vector<double>* library) {
  const auto n = static_cast<std::ptrdiff_t>(std::min(t.mine.size(), t.library.size()));
  std::vector<double> blocks(t.mine.begin(), t.mine.begin() + n);
  blocks.insert(blocks.end(), t.library.begin(), t.library.begin() + n);
  if (PMPI_Allreduce(MPI_IN_PLACE, blocks.data(), static_cast<int>(blocks.size()), MPI_DOUBLE, MPI_MAX, h.parent) !=
      MPI_SUCCESS)
    return false;
  mine->assign(blocks.begin(), blocks.begin() + n);
  library->assign(blocks.begin() + n, blocks.end());
  return true;
}

// The lower quartile of `v` (its smallest where it holds fewer than five).
double lower_quartile(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t at = (v.size() - 1) / 4;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
  return v[at];
}

// "library", or the name of the challenger taken before this one.
std::string opponent_name(const Trial& t) {
  return t.key.opponent ? std::string(t.key.opponent->name) : std::string("library");
}

// A rank's typical sample on one side of trial t: its median where t's
// calls are above kFullTrialBytes (a large call's trial: two to four
// timed calls a side), else its lower quartile. The lower quartile of
// four is the smallest, which sides with whichever spreads its calls the
// more: under Open MPI on 4 ranks, lanes' 1 MiB allreduce after a barrier
// read 1,179-1,214 us a call at the ranks' medians (1,194-1,208 mean),
// the library's 1,082-1,440 (1,144-1,398); summed over the ranks the
// library's smallest calls led lanes' by 4.6%, its medians trailed by
// 6.8%, and lanes, 1.20-1.30x ahead in the model check, went back to the
// library. Smaller calls keep the quartile at every look, half way
// included, where a rank's stretch of stalled calls is what it is for
// (below).
double typical(const Trial& t, const std::vector<double>& v) {
  return t.warm_calls > 0 ? median(v) : lower_quartile(v);
}

// Whether the algorithm is not behind its opponent on the ranks' mean of
// their unhindered calls: each rank's typical one (typical()) of its timed calls of
// each side where every call is the first since a barrier (condition 2),
// else of its blocks, summed over the ranks (one allreduce, on every rank
// alike), the algorithm's at most `tie` times the opponent's (kMeanTie
// where it leads the slowest rank by more than kOverturn, else 1). False
// where the allreduce failed. `mean`: the two sums over the ranks' count
// (seconds a block).
//
// A rank's own quartile, not the median of the blocks summed over the
// ranks: on 4 ranks over 2 cores a rank's calls fall into stretches of tens
// of calls where its core is taken, which weigh on such a sum in most
// blocks and on the rank's own median too. Under Open MPI, in OSU's timing
// loop, one rank's library calls of a 64 B broadcast read 4.3-4.6 us for
// 13 calls in a row (0.1 us before and after), the other ranks' 0.1-0.6 us
// throughout; summed block by block, binomial led the ranks' mean 0.34
// against 1.20 us and took the shape (so taken, the 64-128 B broadcasts ran
// at 0.46-0.67 of the library in single launches), while the ranks' lower
// quartiles had the library ahead (0.62 against 1.02 us summed; on the
// rank with the stretch, 0.11 against 0.21 us). The quartile still sees a
// cost the library puts on a few ranks on every call (its 512 B broadcast
// there, which scatter_allgather leads on the mean by 1.7x in OSU's loop).
// Calls between barriers are each other's independent samples; elsewhere
// a call's time rests on the one before (a root that returned early waits
// in the next), so a block is the sample.
bool not_behind_on_the_mean(const Trial& t, const Hierarchy& h, double tie, double mean[2] = nullptr) {
  const bool calls = t.key.condition == 2 && !t.mine_calls.empty() && !t.library_calls.empty();
  const double per_block = timed_calls(t);
  double sums[2] = {calls ? typical(t, t.mine_calls) * per_block : typical(t, t.mine),
                    calls ? typical(t, t.library_calls) * per_block : typical(t, t.library)};
  if (config().log_level >= LogLevel::debug) {
    // Every rank's own figures, a call each, so that a verdict on the mean can be traced rank by rank.
    const std::vector<double>& mine = calls ? t.mine_calls : t.mine;
    const std::vector<double>& theirs = calls ? t.library_calls : t.library;
    const double us = (calls ? 1.0 : 1.0 / per_block) * 1e6;
    auto average = [](const std::vector<double>& v) {
      return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    };
    log(LogLevel::debug,
        "trial: %s/%s, this rank's %s, us a call: lower quartile %.2f/%.2f, median %.2f/%.2f, mean %.2f/%.2f",
        std::string(t.key.algorithm->name).c_str(), opponent_name(t).c_str(), calls ? "calls" : "blocks",
        lower_quartile(mine) * us, lower_quartile(theirs) * us, median(mine) * us, median(theirs) * us,
        average(mine) * us, average(theirs) * us);
  }
  if (PMPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, h.parent) != MPI_SUCCESS) return false;
  if (mean) {
    mean[0] = sums[0] / h.size;
    mean[1] = sums[1] / h.size;
  }
  return sums[0] <= sums[1] * tie;
}

// Whether t's algorithm is kept (a thin lead) or takes the shape (a
// challenger to a thin lead) only where it is not behind on the ranks'
// mean either (not_behind_on_the_mean). A thin lead's trial of fewer than
// four pairs is judged as the model's choice is. A challenger on a rank
// count the profile did not time is judged on the slowest rank alone:
// asked to lead the ranks' mean too where each call is the first since
// a barrier, binomial's 16-128 B broadcasts there on 5 ranks (Open MPI, a
// 4-rank profile) stayed with the library at 1.11-1.45x behind binomial
// on the slowest rank in the model check, where they had been taken.
bool weighs_the_mean(const Trial& t) {
  return (t.key.role == TrialRole::thin && t.mine.size() >= 4) || t.key.role == TrialRole::thin_challenger;
}

// Block pairs (each of the algorithm's blocks against the library's next to it) the algorithm won.
size_t pairs_won(const std::vector<double>& mine, const std::vector<double>& library) {
  size_t wins = 0;
  for (size_t i = 0; i < mine.size(); ++i) wins += mine[i] < library[i] ? 1 : 0;
  return wins;
}

// The lead a challenger needs to take the shape half way (stop_early), or
// at the end of a trial of fewer than four pairs (settle).
constexpr double kDecisive = 1.5;
// Whether a challenger's median block (`mine`) leads the opponent's by
// `factor`, and on the first calls since a barrier gains
// after_barrier_min_gain a call.
bool leads_by(const Trial& t, double mine, double opponent, double factor) {
  const double per_call = 1.0 / timed_calls(t);
  return mine * factor < opponent && (t.key.condition != 2 || (opponent - mine) * per_call >= after_barrier_min_gain);
}

// Bytes of `count` elements of `type` (a call's, or a shape key's).
int64_t bytes_of(MPI_Datatype type, int count) {
  int size = 0;
  if (type != MPI_DATATYPE_NULL) PMPI_Type_size(type, &size);
  return static_cast<int64_t>(size) * count;
}
int64_t bytes_of(const Call& c) { return bytes_of(c.type, c.count); }

// Notes t's end: both sides' medians of their blocks (seconds a block), and
// whether the algorithm serves the shape after it.
void record(const Trial& t, const Call& c, double mine, double opponent, bool taken) {
  const double per_call = 1.0 / timed_calls(t);
  std::lock_guard<std::mutex> guard(g_records_lock);
  if (g_records.size() >= kMaxRecords) g_records.erase(g_records.begin());
  g_records.push_back({.collective = c.collective,
                       .bytes = bytes_of(c),
                       .condition = t.key.condition,
                       .algorithm = t.key.algorithm,
                       .opponent = t.key.opponent,
                       .seconds = mine * per_call,
                       .opponent_seconds = opponent * per_call,
                       .taken = taken});
}

// The block pairs a short trial (large calls, fewer than four pairs) runs
// to where its challenger won every pair by a lead too thin to take the
// shape on so few (above kOverturn, below kDecisive); it is then judged as
// a trial of that many pairs is. Two pairs of one timed call each could not
// tell binomial's 1 MiB reduce from a rotating root on 3 ranks (Open MPI,
// 2 cores), which led the library by 1.15x on both and by 1.3-1.8x in the
// model check: it was left out at every check.
constexpr int kExtendedPairs = 4;

// Whether a short trial's challenger, having won its `wins` of `n` pairs
// with these medians, earns the pairs up to kExtendedPairs.
bool earns_more_pairs(const Trial& t, size_t n, size_t wins, const double slowest[2]) {
  return is_challenger(t.key.role) && n == static_cast<size_t>(t.pairs) && t.pairs < kExtendedPairs && wins == n &&
         leads_by(t, slowest[0], slowest[1], kOverturn) && !leads_by(t, slowest[0], slowest[1], kDecisive);
}

// Whether a trial of `key` would repeat a loss measured beside it: on this
// communicator, in the same pattern, a trial of the same algorithm against
// the same opponent (and in the same role: a challenger, or the model's
// choice), on a shape of the same collective within kLostSpan in bytes,
// ended with the opponent serving its shape, the algorithm not ahead
// there (a challenger: its median no shorter than the opponent's; the
// model's choice: the opponent led by more than kOverturn, or at all for a
// thin lead), and no trial of it within that span ended the other way.
// Spared trials count as none (their lead is 0), so a sweep that doubles
// its size tries every other size at least, and an algorithm whose loss
// turns to a lead between two sizes is tried within one doubling of it.
// Only up to kFullTrialBytes a call: above, a trial is short, and the
// library changes its own algorithm between sizes (Open MPI's broadcast
// on 6 ranks: `binomial` 1.6x behind it at 512 KiB, 1.2-1.3x ahead at 1
// MiB, where a spared trial left the library 1.16-1.36x behind).
//
// In OSU's timing loop on 3 ranks (Open MPI, a 4-rank profile), 111 of
// the 112 trials at 8 B-32 KiB (two a shape) ended with the library, most
// at half way, each costing its shape's timed calls up to 16 calls of the
// slower side; spared so, 49 trials of calls up to 64 KiB ended before
// their first call, and OSU's average over the 90 shapes read 1.051 of the
// library (1.043-1.064 sparing at every size) against 1.010-1.045 before
// (four launches). The `info` log names each one spared.
// `beside`, `lead`: the shape's bytes and the lead of the loss found.
bool lost_beside(const TrialBook& book, const TrialKey& key, int64_t* beside, double* lead) {
  const auto bytes = static_cast<double>(bytes_of(key.call.type, key.call.count));
  if (bytes <= 0 || bytes > kFullTrialBytes) return false;
  const bool challenger = is_challenger(key.role);
  bool lost = false;
  for (const Trial& t : book.trials) {
    if (t.verdict == Verdict::trying || t.lead <= 0 || t.key.condition != key.condition ||
        t.key.algorithm != key.algorithm || t.key.opponent != key.opponent || is_challenger(t.key.role) != challenger ||
        t.key.call.collective != key.call.collective)
      continue;
    const auto other = static_cast<double>(bytes_of(t.key.call.type, t.key.call.count));
    if (other <= 0 || std::max(other / bytes, bytes / other) > kLostSpan) continue;
    const double bar = challenger || t.key.role == TrialRole::thin ? 1.0 : 1.0 / kOverturn;
    if (t.verdict != Verdict::drop || t.lead > bar) return false;  // ahead beside it: tried here
    if (!lost) {
      *beside = static_cast<int64_t>(other);
      *lead = t.lead;
    }
    lost = true;
  }
  return lost;
}

// Each block's time a call on the slowest rank, both sides in the order they ran (VENEER_LOG=debug).
void log_blocks(const Trial& t, const Call& c, const Hierarchy& h, const std::vector<double>& mine,
                const std::vector<double>& library) {
  const double per_call = 1e6 / timed_calls(t);
  std::string text;
  char one[32];
  for (size_t i = 0; i < mine.size(); ++i) {
    std::snprintf(one, sizeof one, " %.2f/%.2f", mine[i] * per_call, library[i] * per_call);
    text += one;
  }
  log(LogLevel::debug, "trial: %s of %lld bytes on %d ranks%s: %s/%s us a call, block pairs:%s",
      std::string(collective_name(c.collective)).c_str(), static_cast<long long>(bytes_of(c)), h.size,
      condition_name(t.key.condition), std::string(t.key.algorithm->name).c_str(), opponent_name(t).c_str(),
      text.c_str());
}

Verdict settle(const Trial& t, const Call& c, const Hierarchy& h, double* lead) {
  std::vector<double> mine, library;
  // Where the allreduce failed there is no measurement to go by: the opponent serves the shape.
  if (!blocks_over_ranks(t, h, &mine, &library)) return Verdict::drop;
  const size_t n = mine.size();
  const double slowest[2] = {median(mine), median(library)};
  const size_t wins = pairs_won(mine, library);
  const double per_call = 1.0 / timed_calls(t);
  const bool challenger = is_challenger(t.key.role);
  *lead = slowest[0] > 0 ? slowest[1] / slowest[0] : 0;
  if (h.rank == 0 && config().log_level >= LogLevel::debug) log_blocks(t, c, h, mine, library);
  if (earns_more_pairs(t, n, wins, slowest)) {
    if (h.rank == 0 && config().log_level >= LogLevel::info)
      log(LogLevel::info,
          "trial: %s of %lld bytes on %d ranks%s: %s %.2f us, %s %.2f us per call, won all %zu block pairs by "
          "less than %.1fx: %d pairs",
          std::string(collective_name(c.collective)).c_str(), static_cast<long long>(bytes_of(c)), h.size,
          condition_name(t.key.condition), std::string(t.key.algorithm->name).c_str(), slowest[0] * per_call * 1e6,
          opponent_name(t).c_str(), slowest[1] * per_call * 1e6, n, kDecisive, kExtendedPairs);
    return Verdict::trying;  // the caller runs the pairs up to kExtendedPairs
  }
  // A thin lead must not trail at all, where the trial has pairs enough to
  // tell (four or more: calls up to 128 KiB); in a shorter one, one timed
  // call a block, it stays unless clearly beaten, as the model's choice
  // does (the 1 MiB broadcast after a barrier on 4 ranks, which
  // scatter_allgather led by 1.1x in the model check, went back to the
  // library on two blocks of one call each).
  const bool thin = t.key.role == TrialRole::thin && n >= 4;
  bool keep = slowest[0] <= slowest[1] * (thin ? 1.0 : kOverturn);
  // A short trial (large calls: two or three pairs, one timed call a block)
  // gives a challenger the shape only for a lead of kDecisive: taking a
  // wrong one costs every later call of the job, leaving a right one out
  // costs what it would have gained. Its median must also lead the
  // opponent's fastest block by kOverturn, as a take half way must
  // (stop_early): on two pairs, one descheduled block of the library's
  // 1 MiB reduce after a barrier (Open MPI, 4 ranks over 2 cores) put
  // binomial 10.6x ahead, where the model check's batches had it at 0.97x.
  if (challenger)
    keep = leads_by(t, slowest[0], slowest[1], n < 4 ? kDecisive : kOverturn) && wins >= pairs_to_win(n) &&
           (n >= 4 || (n > 0 && leads_by(t, slowest[0], *std::min_element(library.begin(), library.end()), kOverturn)));
  // A thin lead is kept only where it does not trail on the ranks' mean
  // either (each rank's lower quartile, summed): under MPICH on 4 ranks over
  // 2 cores, the library's small allreduce and allgather let some ranks
  // leave early and two_level did not, so OSU's timing loop (the ranks'
  // mean) read 0.52-0.62 of the library where the slowest rank read
  // 0.95-1.03. A challenger to a thin lead of the library's is taken only
  // so too.
  double means[2] = {0, 0};
  if (keep && weighs_the_mean(t))
    keep = not_behind_on_the_mean(t, h, slowest[0] * kOverturn < slowest[1] ? kMeanTie : 1.0, means);
  const Verdict v = keep ? Verdict::keep : Verdict::drop;
  record(t, c, slowest[0], slowest[1], keep);
  if (challenger) (keep ? g_taken : g_not_taken).fetch_add(1, std::memory_order_relaxed);
  else (keep ? g_kept : g_dropped).fetch_add(1, std::memory_order_relaxed);
  if (h.rank == 0 && config().log_level >= LogLevel::info) {
    int size = 0;
    if (c.type != MPI_DATATYPE_NULL) PMPI_Type_size(c.type, &size);
    char quartiles[96] = "";
    if (means[0] > 0)
      std::snprintf(quartiles, sizeof quartiles, "; the ranks' mean of their lower quartiles %.2f and %.2f us",
                    means[0] * per_call * 1e6, means[1] * per_call * 1e6);
    log(LogLevel::info,
        "trial: %s of %lld bytes on %d ranks%s: %s %.2f us, %s %.2f us per call (median of %zu blocks each, "
        "each block's slowest rank; %zu of %zu pairs won%s): %s%s",
        std::string(collective_name(c.collective)).c_str(), static_cast<long long>(size) * c.count, h.size,
        condition_name(t.key.condition), std::string(t.key.algorithm->name).c_str(), slowest[0] * per_call * 1e6,
        opponent_name(t).c_str(), slowest[1] * per_call * 1e6, n, wins, n, quartiles, challenger ? "challenger " : "",
        keep ? (challenger ? "taken" : "kept")
             : (challenger ? (t.key.opponent ? "not taken, the opponent stays" : "not taken")
                           : "returned to the library"));
  }
  return v;
}

// Roots a block of a rotating root's calls covers (below).
constexpr int kRootsABlockCovers = 8;
// Whether a block of this pattern is whole turns of a rotating root (block_calls_for).
bool in_turns(uint8_t condition, int ranks) { return condition == 1 && ranks <= kRootsABlockCovers; }

// Calls at the start of a block that are not timed: one, and above
// kFullTrialBytes a call two, where the root does not move on every call
// (a rotating root's block is whole turns of it after one call). The first
// large calls of a side after the other side's run slow, the second too:
// under MPICH on 6 ranks over 2 cores, bruck's 512 KiB allgather after a
// barrier read 790-870 us a call in the blocks that followed one of the
// library's and 440-480 us in those that followed one of its own (the
// model check's batches: 444 us), and its trial of 1 MiB calls returned it
// to the library, which it led 1.8x in the batches; two_level's 512 KiB
// reduce read 940-1,090 against 590-670 us the same way, and the
// library's own blocks 1.1-1.2x slower after the other side's.
int untimed_calls_for(const Call& c, uint8_t condition, int ranks) {
  return bytes_of(c) > kFullTrialBytes && !in_turns(condition, ranks) ? 2 : 1;
}

// Calls a block of this trial runs. Where the root moved (condition 1),
// the timed calls are a whole number of turns of the root over the ranks
// (up to kRootsABlockCovers ranks): each rank's block then holds a call
// from each root, and times what a rotating root costs a call, which
// rests in part on the call before it (a root that returned early waits
// in the next call). Timed one call a block, a trial's ratio of the two
// sides was a median 1.22x off the one the model check's batches then
// measured under MPICH on 2 ranks (1.13x under Open MPI on 4, 1.15x on 3),
// and pointed the wrong way by more than 10% in 6 of 153 trials; timed
// over whole turns, 1.06x (1.09x, 1.14x), and 2 of 150 (broadcasts and
// reduces from a rotating root, 16 B-1 MiB, 2-4 ranks, both MPIs, three
// checks each).
int block_calls_for(const Call& c, uint8_t condition, int ranks) {
  const int block = bytes_of(c) > kFullTrialBytes ? kLargeBlock : kBlock;  // one untimed call, then timed ones
  if (!in_turns(condition, ranks)) return block + untimed_calls_for(c, condition, ranks) - 1;
  const int turns = (block - 1 + ranks - 1) / ranks;
  return 1 + turns * ranks;
}

// Untimed calls a trial runs first on each side (one side's, then the
// other's), above kFullTrialBytes a call: the first large calls of a shape are slow on
// whichever side makes them (the library's own buffers and the pages of a
// message touched afresh), and a block of two calls times its second
// while that is not over. Under Open MPI on 2 ranks, in OSU's timing loop,
// the library's first blocks of a 1 MiB broadcast read 131-144 us a call
// against the 94-100 us it ran at from then on, and binomial, timed
// second, took the shape at 105 us and ran at 0.87x of the library.
//
// Smaller calls that are each the first since a barrier: none of each
// side, but first kBarrierWarmTrials times the trial's timed calls of the
// side that runs first (lead_calls_for), in the first trial of the shape's
// pattern only (`follows`: another trial of it ran before, and the ranks
// are in their loop). Ranks that share cores settle into a loop of
// barrier and call only after tens of calls, and not as fast for every
// algorithm: under MPICH on 4 ranks over 2 cores, recursive_doubling's
// 128 B allreduce read 40-59 us a call in its first block and 18-35 us in
// its last, the library's 16-31 us after its first, and its trial returned
// it to the library in 4 of 4 launches (1-2 of 8 block pairs won), where
// the model check's batches had it 1.09-1.34x ahead; after 64 untimed
// calls of its own first it was kept in 5 of 6 (3-8 of 8 won). The side
// that runs first is what the job runs untried (the model's choice; the
// library against a challenger), so these calls cost the job nothing a
// trial does not: warmed on both sides, in OSU's timing loop (a barrier
// after each call, 200 untimed calls first up to 8 KiB), the next trial
// of a chain ran into the timed calls, and 30-34 of 90 shapes read below
// 0.97 of the library under Open MPI on 4 ranks, against 17-23 without.
// Six trials' calls (192 at the default VENEER_TRIAL), not two: under MPICH
// the calls of Veneer's algorithms between barriers run 2-5x slower for a
// few hundred calls after the library's (recursive_doubling's 128 B
// allreduce on 4 ranks read 150-300 us a call on rank 0 in its trial after
// 64 of its own, the library's 40 us, and 59 us against 69 in the model
// check's batches; two_level's read 0.36-0.57 of the library's in trials
// and 0.84-1.04 in the batches). MPICH, 4 ranks, allreduce of 16 B-8 KiB
// after a barrier (20 shapes), three checks each: within 1.10x 41 of 60
// with 64 lead calls, 49 with 192 (51 with 192 and three times the trial's
// blocks, 41 with those blocks and 64); the whole check at 4 / 6 ranks,
// 48 -> 54 and 48 -> 51 of 56 (Open MPI 52 -> 54, 56 -> 55); OSU's loop on
// 4 ranks (two launches each), MPICH's allreduce of 8 B-8 KiB 1.28 -> 1.54
// of the library (geometric mean), all 90 shapes 1.053-1.061 ->
// 1.055-1.096, Open MPI's 1.001-1.009 -> 1.000-1.027 with 36-38 shapes
// below 0.97 against 25-26 (a chain's first trial ends 128 calls later,
// after 224-256 calls: its blocks now run past OSU's 200 untimed calls).
// Elsewhere a block's first untimed call is warm-up enough, and a trial of
// small calls costs its job little more than its blocks.
int warm_calls_for(const Call& c) { return bytes_of(c) > kFullTrialBytes ? kLargeBlock : 0; }
constexpr int kBarrierWarmTrials = 6;
int lead_calls_for(const Call& c, uint8_t condition, bool follows) {
  if (bytes_of(c) > kFullTrialBytes || condition != 2 || follows) return 0;
  return kBarrierWarmTrials * std::max(1, config().trial_calls);
}

// Blocks of each side: VENEER_TRIAL calls (rounded up to whole blocks of
// four) up to kFullTrialBytes a call, fewer above in proportion to the
// bytes, down to two blocks a side for a challenger, kExtendedPairs for
// the model's choice. A large call's time varies less from call to call,
// and a trial of a slow choice costs in proportion to its calls: with a
// full trial of 1 MiB calls, a job of 60 calls spent half of them on it.
// Bytes, not times, so that every rank counts the same blocks.
//
// The model's choice runs every call after its trial unless the library
// leads it there by more than kOverturn, so two timed calls a side were
// too few to catch it where the profile was wrong for the job's pattern:
// under Open MPI on 4 ranks, in OSU's timing loop, scatter_allgather's
// 1 MiB broadcast (247 us against the library's 313 us in the profile's
// back-to-back calls) was kept on 1,913 against 1,933 us and ran at
// 0.85-0.91 of the library from then on, in each of eight runs. Two more
// pairs cost a slow choice two calls' difference; one kept wrongly costs
// it on every call of the job. A challenger leaves the library serving
// the shape unless it leads, and earns more pairs on a thin lead
// (earns_more_pairs).
int blocks_for(const Call& c, TrialRole role) {
  const int full = std::max(1, (config().trial_calls + kBlock - 1) / kBlock);
  const int64_t bytes = bytes_of(c);
  if (bytes <= kFullTrialBytes) return full;
  const int64_t scaled = full * kFullTrialBytes / bytes;
  return static_cast<int>(std::clamp<int64_t>(scaled, std::min(full, is_challenger(role) ? 2 : kExtendedPairs), full));
}

// A challenger's trial is looked at before its end (one allreduce of the
// blocks so far, on every rank alike): after every pair for calls above
// kFullTrialBytes, once at half way for smaller ones (where an allreduce
// after every pair would cost about as much as the calls it saves).
// - A challenger whose blocks so far have lost more pairs than the trial
//   allows cannot take the shape whatever its remaining blocks do: its
//   trial ends there, not taken, as it would have at its end.
// - One that won every pair so far, two at least, with a median lead of
//   kDecisive (and the gain a call after a barrier asks for), and a lead
//   of more than kOverturn over the opponent's fastest block as well,
//   takes the shape there: the rest of its trial would only run the
//   opponent's slower calls. The second lead keeps a few slow blocks of
//   the opponent's from deciding the shape on half the trial: under MPICH
//   on 5 ranks over 2 cores, in OSU's loop, the library's blocks of a
//   4 KiB broadcast after a barrier read 27.5 us a call at their median
//   (the trials of 2 and 8 KiB beside it: 4.0 us), binomial took the
//   shape half way and ran at 0.70-0.87x of the library from then on.
//   One that leads the median alone plays the rest of its trial.
// So a trial whose verdict is plain costs the job half its calls.
Verdict stop_early(const Trial& t, const Call& c, const Hierarchy& h, double* lead) {
  std::vector<double> mine, library;
  const bool agreed = blocks_over_ranks(t, h, &mine, &library);
  const size_t n = mine.size(), wins = agreed ? pairs_won(mine, library) : 0;
  *lead = agreed && n > 0 && median(mine) > 0 ? median(library) / median(mine) : 0;
  const size_t total = static_cast<size_t>(t.pairs);
  const double fastest = n > 0 ? *std::min_element(library.begin(), library.end()) : 0;
  if (agreed && n >= 2 && wins == n && leads_by(t, median(mine), median(library), kDecisive) &&
      leads_by(t, median(mine), fastest, kOverturn) &&
      (!weighs_the_mean(t) || not_behind_on_the_mean(t, h, kMeanTie))) {
    g_taken.fetch_add(1, std::memory_order_relaxed);
    record(t, c, median(mine), median(library), true);
    if (h.rank == 0 && config().log_level >= LogLevel::info) {
      const double per_call = 1e6 / timed_calls(t);
      log(LogLevel::info,
          "trial: %s of %lld bytes on %d ranks%s: %s %.2f us, %s %.2f us per call, won all of the first %zu "
          "block pairs of %zu (each block's slowest rank): challenger taken",
          std::string(collective_name(c.collective)).c_str(), static_cast<long long>(bytes_of(c)), h.size,
          condition_name(t.key.condition), std::string(t.key.algorithm->name).c_str(), median(mine) * per_call,
          opponent_name(t).c_str(), median(library) * per_call, n, total);
    }
    return Verdict::keep;
  }
  if (agreed && wins + (total - n) >= pairs_to_win(total)) return Verdict::trying;
  g_not_taken.fetch_add(1, std::memory_order_relaxed);
  if (agreed && n > 0) record(t, c, median(mine), median(library), false);
  if (h.rank == 0 && config().log_level >= LogLevel::info) {
    log(LogLevel::info,
        "trial: %s of %lld bytes on %d ranks%s: %s lost %zu of the first %zu block pairs to %s (each "
        "block's slowest rank), of %zu it had to win %zu: challenger not taken",
        std::string(collective_name(c.collective)).c_str(), static_cast<long long>(bytes_of(c)), h.size,
        condition_name(t.key.condition), std::string(t.key.algorithm->name).c_str(), n - wins, n,
        opponent_name(t).c_str(), total, pairs_to_win(total));
  }
  return Verdict::drop;
}

}  // namespace

bool tried_whatever_its_lead(const Call& c) { return bytes_of(c) > kFullTrialBytes; }

bool triable(const Call& c) {
  if (config().trial_calls <= 0) return false;
  // By its bytes (shape_key), whatever types each rank gives them in: a
  // rank that described the data with a derived type and did not try
  // while the others did left them waiting in the trial's blocks.
  if (moves_bytes(c.collective)) return true;
  if (!rememberable(c)) return false;
  return named(c.type) && (c.sbuf == MPI_IN_PLACE || named(c.stype));
}

Verdict trial_run(const Algorithm& a, const Call& c, const Hierarchy& h, uint8_t condition, TrialRole role,
                  const Algorithm* opponent, std::optional<int>* ran) {
  const TrialKey key = key_of(c, condition, a, opponent, role);
  const bool challenger = is_challenger(role);
  TrialBook& book = book_of(h);
  auto find = [&] {
    return std::find_if(book.trials.begin(), book.trials.end(), [&](const Trial& t) { return t.key == key; });
  };
  int call = 0, block_calls = kBlock, pairs = 0, untimed = 1;
  int untimed_lead = 0, warm = 0;  // untimed calls: the lead of the first side, then `warm` of each side
  {
    std::lock_guard<std::mutex> guard(book.lock);
    auto it = find();
    if (it == book.trials.end()) {
      // Untried: the model's choice (the library, over a challenger).
      if (book.trials.size() >= kMaxTrials) return challenger ? Verdict::drop : Verdict::keep;
      const bool follows = std::any_of(book.trials.begin(), book.trials.end(), [&](const Trial& t) {
        return t.key.call == key.call && t.key.condition == condition && t.calls > 0;  // ran: not spared
      });
      int64_t beside = 0;
      double lost_by = 0;
      const bool spared = lost_beside(book, key, &beside, &lost_by);
      it = book.trials.emplace(book.trials.end());
      it->key = key;
      if (spared) {
        // Ended before its first call, with a lead of 0: no evidence beside another shape.
        it->verdict = Verdict::drop;
        g_spared.fetch_add(1, std::memory_order_relaxed);
        if (h.rank == 0 && config().log_level >= LogLevel::info)
          log(LogLevel::info,
              "trial: %s of %lld bytes on %d ranks%s: %s not tried against %s, which led it %.2fx at %lld bytes",
              std::string(collective_name(c.collective)).c_str(), static_cast<long long>(bytes_of(c)), h.size,
              condition_name(condition), std::string(a.name).c_str(), opponent_name(*it).c_str(), 1.0 / lost_by,
              static_cast<long long>(beside));
        return Verdict::drop;
      }
      it->block_calls = block_calls_for(c, condition, h.size);
      it->untimed = untimed_calls_for(c, condition, h.size);
      it->warm_calls = warm_calls_for(c);
      it->lead_calls = lead_calls_for(c, condition, follows);
      it->pairs = blocks_for(c, role);
      if (condition == 2) g_barrier_trials.fetch_add(1, std::memory_order_relaxed);
    }
    if (it->verdict != Verdict::trying) return it->verdict;
    call = it->calls++;
    block_calls = it->block_calls;
    untimed = it->untimed;
    warm = it->warm_calls;
    untimed_lead = it->lead_calls;
    pairs = it->pairs;
  }
  // Blocks alternate algorithm, library, library, algorithm, ... so that a
  // trend across the calls weighs on both sides alike; the untimed calls
  // before them (lead_calls_for, warm_calls_for) run one side, then the
  // other (block -2, -1).
  const bool large = warm > 0;  // above kFullTrialBytes a call (warm_calls_for)
  const int timed_call = call - untimed_lead - 2 * warm;
  const int block = timed_call < 0 ? (call < untimed_lead + warm ? -2 : -1) : timed_call / block_calls;
  const int position = timed_call < 0 ? 0 : timed_call % block_calls;
  // The model's own choice runs the first block (the library's, against a
  // challenger), so that a shape the job calls a few times only, as a code
  // whose counts change from call to call does, runs what the model chose.
  const bool algorithm_side = (block < 0 ? block == -2 : (block + 1) / 2 % 2 == 0) != challenger;
  // A timed block that does not follow the job's barriers starts from one
  // of the trial's own, on every rank alike: a call that returns before
  // the others are done (a small broadcast's root) lets the ranks drift
  // several calls apart, which the block's untimed first call alone would
  // leave to the next block, of either side. Not where a block is whole
  // turns of a rotating root (in_turns): each rank is the root once in
  // every turn, so the drift does not outlast a block's untimed call, and
  // a barrier before each block times every turn from a standing start,
  // which a job's stream of calls never makes. Under MPICH on 2-7 ranks
  // over 2 cores, broadcasts and reduces of 128 B-64 KiB from a rotating
  // root (three to seven model checks a count, alternated): trials that
  // pointed the other way from the check's batches by more than 10%,
  // 47 of 529 with the barrier and 32 of 529 without; rows beyond 1.25x of
  // the fastest, 19 and 11 of 408. Under Open MPI, 14 of 329 and 14 of 332;
  // 1 and 1 of 216.
  if (block >= 0 && position == 0 && condition != 2 && !in_turns(condition, h.size)) {
    PMPI_Barrier(h.parent);
    g_barriers.fetch_add(1, std::memory_order_relaxed);
  }
  double seconds = 0;
  *ran = timed(algorithm_side ? &a : opponent, c, h, &seconds);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  // After a barrier, the barrier is part of the call's time in its block
  // (each block's slowest rank): it waited for what the call before (of the
  // same side: a block's first call is not timed) left behind. The call's
  // own time is what the ranks' mean weighs (not_behind_on_the_mean), as
  // OSU's average does: under Open MPI on 4 ranks over 2 cores, binomial's
  // 64 B broadcast after a barrier led the library's blocks 6.0 against 7.7
  // us a call with the barrier, and ran at 0.57-0.69x of it by OSU's average.
  const double barrier = condition == 2 ? barrier_before(h.parent) : 0;
  if (block < 0) return Verdict::trying;

  Trial done;
  bool last = false;
  {
    std::lock_guard<std::mutex> guard(book.lock);
    auto it = find();
    if (it == book.trials.end()) return Verdict::trying;
    if (position >= untimed) {
      it->block += seconds + barrier;
      if (condition == 2) (algorithm_side ? it->mine_calls : it->library_calls).push_back(seconds);
    }
    if (position < block_calls - 1) return Verdict::trying;
    (algorithm_side ? it->mine : it->library).push_back(it->block);
    it->block = 0;
    last = block + 1 >= 2 * pairs;
    // A pair is complete after every odd block (the order above): every
    // pair of a large call's trial is looked at, half way for a small one's.
    const bool check = !last && challenger && block % 2 == 1 && (large || block == 2 * (pairs / 2) - 1);
    if (!last && !check) return Verdict::trying;
    done = *it;
  }
  double lead = 0;
  const Verdict v = last ? settle(done, c, h, &lead) : stop_early(done, c, h, &lead);
  std::lock_guard<std::mutex> guard(book.lock);
  auto it = find();
  if (v == Verdict::trying) {
    if (last && it != book.trials.end()) it->pairs = kExtendedPairs;  // settle found the lead worth more pairs
    return v;
  }
  if (it != book.trials.end()) {
    if (it->key.condition == 2) g_barrier_trials.fetch_sub(1, std::memory_order_relaxed);
    it->verdict = v;
    it->lead = lead;
    it->mine = {};
    it->library = {};
    it->mine_calls = {};
    it->library_calls = {};
  }
  return v;
}

std::atomic<int> g_barrier_trials{0};

void note_barrier_seconds(MPI_Comm comm, double seconds) { t_barrier = {.comm = comm, .seconds = seconds}; }

size_t pairs_to_win(size_t pairs) { return (3 * pairs + 3) / 4; }

namespace {
// The winner among `book`'s ended trials for shapes like `k` in pattern
// `condition` (book.lock held), nullptr where none: of the shapes within
// kNeighbourSpan in bytes whose trials ended, the nearest (the later at
// equal distance), and of its trials in their order, the algorithm last
// taken or kept by a lead of more than kOverturn over its opponent, unless
// a later one ended with the library, or with a lead thinner than that.
const Algorithm* winner_beside(const TrialBook& book, const DecisionKey& k, uint8_t condition) {
  const auto bytes = static_cast<double>(bytes_of(k.type, k.count));
  if (bytes <= 0) return nullptr;
  auto alike = [&](const Trial& t) {
    return t.verdict != Verdict::trying && t.key.condition == condition && t.key.call.collective == k.collective &&
           !(t.key.call == k);
  };
  const DecisionKey* nearest = nullptr;
  double distance = 0;
  for (const Trial& t : book.trials) {
    if (!alike(t)) continue;
    const auto other = static_cast<double>(bytes_of(t.key.call.type, t.key.call.count));
    if (other <= 0) continue;
    const double apart = std::max(other / bytes, bytes / other);
    if (apart <= kNeighbourSpan && (!nearest || apart <= distance)) {
      nearest = &t.key.call;
      distance = apart;
    }
  }
  if (!nearest) return nullptr;
  const Algorithm* winner = nullptr;
  for (const Trial& t : book.trials) {
    if (!alike(t) || !(t.key.call == *nearest)) continue;
    if (t.verdict == Verdict::keep) winner = t.lead > kOverturn ? t.key.algorithm : nullptr;
    else if (t.key.opponent != winner) winner = nullptr;  // the library (or one not clearly ahead) serves it
  }
  return winner;
}
}  // namespace

const Algorithm* neighbours_winner(const Call& c, const Hierarchy& h, uint8_t condition, bool* first) {
  if (first) *first = false;
  if (!triable(c)) return nullptr;
  const DecisionKey k = shape_key(c);
  TrialBook& book = book_of(h);
  std::lock_guard<std::mutex> guard(book.lock);
  for (const NeighbourAnswer& n : book.neighbours)
    if (n.condition == condition && n.call == k) return n.winner;
  if (book.neighbours.size() >= kMaxTrials) return nullptr;
  const Algorithm* winner = winner_beside(book, k, condition);
  book.neighbours.push_back({.call = k, .condition = condition, .winner = winner});
  if (first) *first = true;
  return winner;
}

void handicap_for_testing(const Algorithm* a, double seconds) {
  std::lock_guard<std::mutex> guard(g_handicaps_lock);
  size_t kept = 0;
  for (size_t i = 0; i < g_handicap_count; ++i)
    if (g_handicaps[i].side != a) g_handicaps[kept++] = g_handicaps[i];
  if (seconds > 0 && kept < g_handicaps.size()) g_handicaps[kept++] = {.side = a, .seconds = seconds};
  g_handicap_count = kept;
  g_handicapped.store(kept > 0, std::memory_order_relaxed);
}

void no_handicaps_for_testing() {
  std::lock_guard<std::mutex> guard(g_handicaps_lock);
  g_handicap_count = 0;
  g_handicapped.store(false, std::memory_order_relaxed);
}

TrialCounts trial_counts() {
  return {g_kept.load(std::memory_order_relaxed),    g_dropped.load(std::memory_order_relaxed),
          g_taken.load(std::memory_order_relaxed),   g_not_taken.load(std::memory_order_relaxed),
          g_spared.load(std::memory_order_relaxed),  g_calls.load(std::memory_order_relaxed),
          g_barriers.load(std::memory_order_relaxed)};
}

void reset_trial_counts() {
  g_kept.store(0, std::memory_order_relaxed);
  g_dropped.store(0, std::memory_order_relaxed);
  g_taken.store(0, std::memory_order_relaxed);
  g_not_taken.store(0, std::memory_order_relaxed);
  g_spared.store(0, std::memory_order_relaxed);
  g_calls.store(0, std::memory_order_relaxed);
  g_barriers.store(0, std::memory_order_relaxed);
}

std::vector<TrialRecord> trial_records() {
  std::lock_guard<std::mutex> guard(g_records_lock);
  return g_records;
}

void reset_trial_records() {
  std::lock_guard<std::mutex> guard(g_records_lock);
  g_records.clear();
}

std::string trial_counts_text() {
  const TrialCounts t = trial_counts();
  std::string text;
  if (t.kept + t.dropped > 0)
    text = std::to_string(t.kept) + " kept, " + std::to_string(t.dropped) + " returned to the library";
  if (t.taken + t.not_taken > 0) {
    if (!text.empty()) text += "; ";
    text += std::to_string(t.taken) + " challenger" + (t.taken == 1 ? "" : "s") + " taken, " +
            std::to_string(t.not_taken) + " not";
  }
  if (t.spared > 0) {
    if (!text.empty()) text += "; ";
    text += std::to_string(t.spared) + " spared (lost beside)";
  }
  return text;
}

}  // namespace veneer::algorithms
