// SPDX-License-Identifier: BSD-3-Clause
// veneer-model-check: how good Veneer's automatic choices are, measured
// through the real interposed entry points.
//
//   mpirun -np N veneer-model-check [--quick] [--min B] [--max B] [--step K] [--json FILE] ...
//
// Linked with libveneer: MPI_Allreduce etc. are Veneer's entry points (the
// profile is loaded in MPI_Init, decisions are remembered as in any job),
// while PMPI_* reach the library. For every shape of a grid (collective x
// message size x communicator) it runs every eligible choice through MPI_X:
//  - "auto": no override, Veneer's default rules and the loaded profile;
//  - each forced choice: the collective's override variable (VENEER_ALLREDUCE,
//    ...) set to one algorithm's name, or to "library";
// checks each one's result once against the library's (PMPI_X) before timing,
// then times them in interleaved batches (each repetition runs every choice
// once, starting with a different one): per call, the slowest rank's batch
// time / calls, the median over repetitions. For each shape it prints the
// automatic choice and its time, the fastest forced choice and its time,
// their ratio, and the model's prediction for the automatic choice (its time
// and source: measured, interpolated, fitted, default) against the
// measurement. Typed point-to-point is checked the same way: round trips of
// DDTBench layouts with Veneer's automatic send rule, forced take-over
// (VENEER_P2P_MAX_BLOCK=inf, VENEER_P2P_MIN_BYTES=0) and forced pass-through (VENEER_P2P=0).
//
// The last line is the summary:
//   model-check: within-1.10x P%, worst Wx, geomean Gx
// (share of shapes whose automatic choice is within 1.10x of the fastest
// forced one, the worst auto/best ratio, the geometric mean of auto/best).
// A wrong result prints "model-check: FAILED ..." instead and exits 1.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/measured.h"
#include "algorithms/select.h"
#include "algorithms/trial.h"
#include "algorithms/tuning.h"
#include "bench/coll_timing.h"
#include "bench/layouts.h"
#include "support/config.h"
#include "support/counters.h"
#include "topology/hierarchy.h"

namespace {

namespace alg = veneer::algorithms;
namespace bench = veneer::bench;
using alg::Collective;

const char* const kUsage =
    "usage: veneer-model-check [--quick] [--min BYTES] [--max BYTES] [--step K] [--collective NAME]...\n"
    "                          [--split] [--no-p2p] [--repetitions R] [--seconds S] [--json FILE]\n"
    "                          [--profile FILE] [--apps] [--time-trials]\n"
    "  --quick          8 B, 512 B and 32 KiB, 5 repetitions of 1 ms batches, small layouts (CI)\n"
    "  --min/--max      message sizes in bytes, k/M suffixes (default 8 to 4M; the largest is always checked)\n"
    "  --step K         size step factor (default 8)\n"
    "  --collective C   allreduce, bcast, reduce, allgather, reduce_scatter_block or alltoall\n"
    "                   (repeatable; default all of them but reduce), or none (typed sends only)\n"
    "  --split          also check the shapes on two halves of MPI_COMM_WORLD (MPI_Comm_split)\n"
    "  --apps           the call patterns of applications instead of back-to-back batches: bcast and\n"
    "                   reduce with the root rotating over the ranks, then every collective one call\n"
    "                   per timed iteration with a barrier between (as OSU's benchmarks time them)\n"
    "  --no-p2p         leave out the typed point-to-point round trips\n"
    "  --repetitions R  interleaved timed batches per choice (default 11)\n"
    "  --seconds S      length of one timed batch (default 0.003)\n"
    "  --json FILE      one JSON line per shape\n"
    "  --profile FILE   the machine profile libveneer loads (sets VENEER_PROFILE)\n"
    "  --time-trials    time the automatic choice from its first calls, its trials in its batches (by\n"
    "                   default they run out before its timed batches and are reported apart)\n";

struct Options {
  bool quick = false;
  int64_t min_bytes = 8, max_bytes = int64_t{4} << 20, step = 8;
  std::vector<Collective> collectives;
  bool no_collectives = false;  // --collective none: the typed point-to-point part only
  bool split = false;
  bool apps = false;
  bool p2p = true;
  bool time_trials = false;
  int repetitions = 11;
  double batch_seconds = 0.003;
  std::string json_path;
};

bool parse(int argc, char** argv, Options& o) {
  bool sizes_given = false, reps_given = false, seconds_given = false;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--quick") o.quick = true;
    else if (flag == "--split") o.split = true;
    else if (flag == "--apps") o.apps = true;
    else if (flag == "--no-p2p") o.p2p = false;
    else if (flag == "--time-trials") o.time_trials = true;
    else {
      if (a + 1 >= argc) return false;
      const char* v = argv[++a];
      if (flag == "--min" || flag == "--max") {
        auto bytes = veneer::parse_size(v);
        if (!bytes || *bytes < 1) return false;
        (flag == "--min" ? o.min_bytes : o.max_bytes) = *bytes;
        sizes_given = true;
      } else if (flag == "--step") {
        o.step = std::max<int64_t>(2, std::atoll(v));
        sizes_given = true;
      } else if (flag == "--collective" && std::string(v) == "none") {
        o.no_collectives = true;
      } else if (flag == "--collective") {
        auto c = alg::collective_from_name(v);
        if (!c || *c == Collective::reduce_scatter) return false;  // irregular counts: not a grid shape
        o.collectives.push_back(*c);
      } else if (flag == "--repetitions") {
        o.repetitions = std::max(1, std::atoi(v));
        reps_given = true;
      } else if (flag == "--seconds") {
        o.batch_seconds = std::max(1e-4, std::atof(v));
        seconds_given = true;
      } else if (flag == "--json") {
        o.json_path = v;
      } else if (flag == "--profile") {
        setenv("VENEER_PROFILE", v, 1);
      } else {
        return false;
      }
    }
  }
  if (o.quick) {
    if (!sizes_given) {
      o.min_bytes = 8;
      o.max_bytes = 32 << 10;
      o.step = 64;
    }
    if (!reps_given) o.repetitions = 5;
    if (!seconds_given) o.batch_seconds = 0.001;
  }
  if (o.collectives.empty() && !o.no_collectives)
    o.collectives = {Collective::allreduce, Collective::bcast, Collective::allgather, Collective::reduce_scatter_block,
                     Collective::alltoall};
  // Applications' rooted reductions too.
  if (o.apps && std::find(o.collectives.begin(), o.collectives.end(), Collective::reduce) == o.collectives.end() &&
      !o.no_collectives)
    o.collectives.push_back(Collective::reduce);
  return o.min_bytes <= o.max_bytes;
}

std::vector<int64_t> ladder(int64_t lo, int64_t hi, int64_t step) {
  std::vector<int64_t> sizes;
  for (int64_t b = lo; b <= hi; b *= step) sizes.push_back(b);
  if (sizes.empty() || sizes.back() != hi) sizes.push_back(hi);
  return sizes;
}

int g_rank = 0, g_size = 1;

// ---- Switching choices through the environment --------------------------------

// Sets (or, for null, unsets) an environment variable.
void set_variable(const char* name, const char* value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

// Forces `choice` ("auto": no override) for collective c on this rank; every
// rank does the same, so all decide alike.
void apply_collective(Collective c, const std::string& choice) {
  const std::string variable(alg::override_variable(c));
  set_variable(variable.c_str(), choice == "auto" ? nullptr : choice.c_str());
  alg::collectives_init();  // re-reads the overrides and forgets remembered decisions
}

// Point-to-point: "auto" (the built-in rule), "veneer" (every non-contiguous
// send taken over), "library" (every send passed through).
void apply_p2p(const std::string& choice) {
  set_variable("VENEER_P2P_MAX_BLOCK", choice == "veneer" ? "inf" : nullptr);
  set_variable("VENEER_P2P_MIN_BYTES", choice == "veneer" ? "0" : nullptr);
  set_variable("VENEER_P2P", choice == "library" ? "0" : nullptr);
  veneer::reload_config();
}

// Counting what ran (the algorithm, or whether a send was taken over) needs
// Veneer's counters, which count only while a report is wanted: on for the
// data checks, back to the user's setting for the timed batches.
std::optional<std::string> g_user_report;
void counting(bool on) {
  set_variable("VENEER_REPORT", on ? "1" : (g_user_report ? g_user_report->c_str() : nullptr));
  veneer::reload_config();
}

// ---- Timing helpers ----------------------------------------------------------

double max_over_ranks(double v) {
  PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

bool all_ranks(bool ok) {
  int v = ok ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return v != 0;
}

// Calls per batch so one batch lasts about `seconds`: `call`
// run 1, 4, 16, ... times, the quickest of three tries on the slowest rank,
// until that takes a quarter of it. With oversubscribed ranks a single try
// may be mostly the moment a rank waited for a core, which would make the
// batches too short. Every rank gets the same count.
int iterations_for(const std::function<void()>& call, double seconds, int most) {
  call();  // warm
  for (int calls = 1;; calls *= 4) {
    double quickest = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      PMPI_Barrier(MPI_COMM_WORLD);
      const double t0 = bench::now();
      for (int i = 0; i < calls; ++i) call();
      const double elapsed = max_over_ranks(bench::now() - t0);
      quickest = attempt == 0 ? elapsed : std::min(quickest, elapsed);
    }
    if (quickest >= seconds / 4 || calls >= most)
      return static_cast<int>(std::clamp(seconds * calls / std::max(quickest, 1e-9), 1.0, static_cast<double>(most)));
  }
}

// ---- One call of a collective, through Veneer (MPI_X) or the library (PMPI_X) --

// How the timed calls come: back to back with a fixed root (the calibration's
// way), with the root moving to the next rank on every call (panel
// broadcasts, pivots), or one call per iteration after a barrier (OSU's
// way: every call starts from ranks in step, nothing in flight from the
// previous one), timed on the slowest rank from barrier to barrier, as a
// loop of them takes, and on the ranks' mean by the calls alone, as OSU
// reports them.
enum class Pattern { batch, rotating_root, barrier_between };
const char* pattern_suffix(Pattern p) {
  switch (p) {
    case Pattern::batch: return "";
    case Pattern::rotating_root: return "+rot";
    case Pattern::barrier_between: return "+bar";
  }
  return "";
}

int call_collective(const alg::Call& c, MPI_Comm comm, bool veneer) {
  void* sbuf = const_cast<void*>(c.sbuf);
  switch (c.collective) {
    case Collective::allreduce:
      return veneer ? MPI_Allreduce(sbuf, c.rbuf, c.count, c.type, c.op, comm)
                    : PMPI_Allreduce(sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::bcast:
      return veneer ? MPI_Bcast(c.rbuf, c.count, c.type, c.root, comm)
                    : PMPI_Bcast(c.rbuf, c.count, c.type, c.root, comm);
    case Collective::reduce:
      return veneer ? MPI_Reduce(sbuf, c.rbuf, c.count, c.type, c.op, c.root, comm)
                    : PMPI_Reduce(sbuf, c.rbuf, c.count, c.type, c.op, c.root, comm);
    case Collective::allgather:
      return veneer ? MPI_Allgather(sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm)
                    : PMPI_Allgather(sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
    case Collective::reduce_scatter_block:
      return veneer ? MPI_Reduce_scatter_block(sbuf, c.rbuf, c.count, c.type, c.op, comm)
                    : PMPI_Reduce_scatter_block(sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::alltoall:
      return veneer ? MPI_Alltoall(sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm)
                    : PMPI_Alltoall(sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
    case Collective::reduce_scatter: break;
  }
  return MPI_ERR_INTERN;
}

// ---- Results ---------------------------------------------------------------------

struct Row {
  std::string kind;  // "collective" or "p2p"
  std::string what;  // collective name or layout
  std::string comm;  // "world", "half" or a pair ("0<->1 same node")
  int ranks = 0;
  int64_t bytes = 0;
  std::string auto_name;    // what the automatic choice ran, as printed
  std::string auto_choice;  // the same, as a choice name
  double auto_seconds = 0;
  std::string best_name;  // the fastest forced choice
  double best_seconds = 0;
  double predicted = 0;              // the model's time for the automatic choice; 0: none
  std::string source;                // of predicted
  std::vector<std::string> choices;  // forced ones, in order
  std::vector<double> seconds;
  int calls = 0;            // per timed batch (the fewest, where choices differ)
  int calls_most = 0;       // the most per timed batch; 0: as `calls`
  double same_seconds = 0;  // the automatic choice's own algorithm, forced (0: not among them)
  // The same on the ranks' mean (collectives; 0: not timed so): the
  // automatic choice's, and the fastest forced choice's by that measure.
  double mean_auto = 0, mean_best = 0;
  std::vector<double> mean_seconds;  // each forced choice's, in the order of `choices`
  // The trials that ended on this shape's calls in its pattern, each beside
  // the forced batches of its two sides: the opponent's time over the
  // algorithm's, as the trial measured it and as the batches did.
  struct TrialCheck {
    std::string algorithm, opponent;
    double trial_ratio = 0, batch_ratio = 0;
    bool taken = false;
  };
  std::vector<TrialCheck> trials;
  // The automatic choice's calls while its trials ran, before its timed
  // batches (run_out_trials): how many, and per call on the slowest rank
  // (0: no trial ran).
  int trial_calls = 0;
  double trial_seconds = 0;
  double ratio() const { return auto_seconds / best_seconds; }
  double mean_ratio() const { return mean_auto / mean_best; }
};

std::string us(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", seconds * 1e6);
  return text;
}

void print_header() {
  std::printf("%-22s %9s %-10s %-22s %10s %-22s %10s %9s %10s %-12s %9s\n", "shape", "bytes", "comm", "automatic",
              "auto us", "best forced", "best us", "auto/best", "predicted", "source", "pred/meas");
}

void print_row(const Row& r) {
  const std::string predicted = r.predicted > 0 ? us(r.predicted) : "-";
  char error[32] = "-";
  if (r.predicted > 0) std::snprintf(error, sizeof error, "%.2f", r.predicted / r.auto_seconds);
  std::printf("%-22s %9lld %-10s %-22s %10s %-22s %10s %9.2f %10s %-12s %9s\n", r.what.c_str(),
              static_cast<long long>(r.bytes), r.comm.c_str(), r.auto_name.c_str(), us(r.auto_seconds).c_str(),
              r.best_name.c_str(), us(r.best_seconds).c_str(), r.ratio(), predicted.c_str(),
              r.predicted > 0 ? r.source.c_str() : "-", error);
  std::string all = "    forced:";
  for (size_t k = 0; k < r.choices.size(); ++k)
    all += " " + r.choices[k] + " " + us(r.seconds[k]) + (r.choices[k] == r.best_name ? "*" : "");
  if (r.calls_most > r.calls) std::printf("%s  (%d-%d calls per batch)\n", all.c_str(), r.calls, r.calls_most);
  else std::printf("%s  (%d calls per batch)\n", all.c_str(), r.calls);
  for (const Row::TrialCheck& t : r.trials)
    std::printf("    trial: %s against %s, %s's time over its %.2fx, in the batches %.2fx; then %s\n",
                t.algorithm.c_str(), t.opponent.c_str(), t.opponent.c_str(), t.trial_ratio, t.batch_ratio,
                (t.taken ? t.algorithm : t.opponent).c_str());
  std::fflush(stdout);
}

void write_json(std::FILE* f, const Row& r) {
  std::fprintf(f,
               "{\"bench\":\"model_check\",\"kind\":\"%s\",\"case\":\"%s\",\"comm\":\"%s\",\"ranks\":%d,"
               "\"bytes\":%lld,\"auto\":\"%s\",\"auto_us\":%.4f,\"best\":\"%s\",\"best_us\":%.4f,\"ratio\":%.4f",
               r.kind.c_str(), r.what.c_str(), r.comm.c_str(), r.ranks, static_cast<long long>(r.bytes),
               r.auto_name.c_str(), r.auto_seconds * 1e6, r.best_name.c_str(), r.best_seconds * 1e6, r.ratio());
  if (r.predicted > 0)
    std::fprintf(f, ",\"predicted_us\":%.4f,\"source\":\"%s\",\"prediction_error\":%.4f", r.predicted * 1e6,
                 r.source.c_str(), r.predicted / r.auto_seconds);
  if (r.same_seconds > 0) std::fprintf(f, ",\"auto_forced_us\":%.4f", r.same_seconds * 1e6);
  if (r.mean_best > 0)
    std::fprintf(f, ",\"auto_mean_us\":%.4f,\"best_mean_us\":%.4f", r.mean_auto * 1e6, r.mean_best * 1e6);
  std::fprintf(f, ",\"calls_per_batch\":%d", r.calls);
  if (r.calls_most > r.calls) std::fprintf(f, ",\"calls_per_batch_most\":%d", r.calls_most);
  if (r.trial_calls > 0) std::fprintf(f, R"(,"trial_calls":%d,"trial_us":%.4f)", r.trial_calls, r.trial_seconds * 1e6);
  if (!r.trials.empty()) {
    std::fprintf(f, ",\"trials\":[");
    for (size_t k = 0; k < r.trials.size(); ++k)
      std::fprintf(
          f, "%s{\"algorithm\":\"%s\",\"opponent\":\"%s\",\"trial_ratio\":%.4f,\"batch_ratio\":%.4f,\"taken\":%s}",
          k ? "," : "", r.trials[k].algorithm.c_str(), r.trials[k].opponent.c_str(), r.trials[k].trial_ratio,
          r.trials[k].batch_ratio, r.trials[k].taken ? "true" : "false");
    std::fprintf(f, "]");
  }
  std::fprintf(f, ",\"forced_us\":{");
  for (size_t k = 0; k < r.choices.size(); ++k)
    std::fprintf(f, "%s\"%s\":%.4f", k ? "," : "", r.choices[k].c_str(), r.seconds[k] * 1e6);
  std::fprintf(f, "}");
  if (r.mean_seconds.size() == r.choices.size()) {
    std::fprintf(f, ",\"forced_mean_us\":{");
    for (size_t k = 0; k < r.choices.size(); ++k)
      std::fprintf(f, "%s\"%s\":%.4f", k ? "," : "", r.choices[k].c_str(), r.mean_seconds[k] * 1e6);
    std::fprintf(f, "}");
  }
  std::fprintf(f, "}\n");
}

// Fills auto/best from per-choice medians: choices[0] is "auto".
void finish_row(Row& r, const std::vector<std::string>& choices, const std::vector<double>& medians) {
  r.auto_seconds = medians[0];
  r.best_seconds = 0;
  for (size_t k = 1; k < choices.size(); ++k) {
    r.choices.push_back(choices[k]);
    r.seconds.push_back(medians[k]);
    if (choices[k] == r.auto_choice) r.same_seconds = medians[k];
    if (r.best_seconds == 0 || medians[k] < r.best_seconds) {
      r.best_seconds = medians[k];
      r.best_name = choices[k];
    }
  }
}

// ---- Collectives -------------------------------------------------------------------

// Which algorithm the last calls of collective c ran, by Veneer's counts ("" if none counted).
std::string counted_algorithm(Collective c) {
  std::string name;
  for (const alg::AlgorithmCount& n : alg::collectives_counts())
    if (n.collective == c && n.calls > 0) name = std::string(n.algorithm);
  return name;
}

// Every algorithm they ran, joined by "+" ("" if none counted).
std::string counted_algorithms(Collective c) {
  std::string names;
  for (const alg::AlgorithmCount& n : alg::collectives_counts())
    if (n.collective == c && n.calls > 0) names += (names.empty() ? "" : "+") + std::string(n.algorithm);
  return names;
}

bool g_failed = false;
std::string g_failures;

void fail(const std::string& what) {
  g_failed = true;
  if (g_rank == 0) {
    std::printf("model-check: WRONG RESULT: %s\n", what.c_str());
    std::fflush(stdout);
  }
  if (!g_failures.empty()) g_failures += "; ";
  g_failures += what;
}

void note(const std::string& what) {
  if (g_rank == 0) std::printf("    note: %s\n", what.c_str());
}

// The trials of collective c in pattern `condition` (as trial.h numbers
// them) that ended since reset_trial_records(), before this shape's first
// call (so its own: a record's bytes are a block's, per rank, for an
// allgather, an alltoall or a reduce_scatter_block), each beside the forced
// batches of r of its two sides (both must have been timed).
std::vector<Row::TrialCheck> trials_beside_batches(Collective c, uint8_t condition, const Row& r) {
  auto batch = [&](const std::string& name) {
    for (size_t k = 0; k < r.choices.size(); ++k)
      if (r.choices[k] == name) return r.seconds[k];
    return 0.0;
  };
  std::vector<Row::TrialCheck> out;
  for (const alg::TrialRecord& t : alg::trial_records()) {
    if (t.collective != c || t.condition != condition || t.seconds <= 0) continue;
    Row::TrialCheck k;
    k.algorithm = std::string(t.algorithm->name);
    k.opponent = t.opponent ? std::string(t.opponent->name) : std::string("library");
    const double mine = batch(k.algorithm), theirs = batch(k.opponent);
    if (mine <= 0 || theirs <= 0) continue;
    k.trial_ratio = t.opponent_seconds / t.seconds;
    k.batch_ratio = theirs / mine;
    k.taken = t.taken;
    out.push_back(k);
  }
  return out;
}

// The trials of the automatic choice run out before its timed batches, as
// OSU's warm-up calls come before its timed ones: a trial is a few of the
// first calls of a shape, which an application calls hundreds of times.
// Calls in groups of kRunOutGroup until a group ran no call in a trial and
// ended none (a challenger's trial may follow another's on the next call,
// one may be spared: ended before its first call), at most kMostTrialCalls
// or about 3 s. The calls while trials ran are timed apart, per call on
// the slowest rank (*calls 0: no trial ran). Every rank calls it; all stop
// together.
//
// The groups are long, as an application's loop is: between two groups
// the ranks agree whether to go on (two allreduces and a barrier of the
// library's), and the call after that runs out of step. In groups of four
// (a trial's block of a small call is four calls), MPICH's 128 B allreduce
// after a barrier on 4 ranks over 2 cores returned recursive_doubling to
// the library in 4 of 4 checks (trial 0.75-0.98x, batches 1.16-1.23x
// ahead); in groups of 32, in 1 of 4, and in a plain loop of barrier and
// call the same trial kept it in 3 of 3 launches.
constexpr int kMostTrialCalls = 1024;
constexpr int kRunOutGroup = 32;
void run_out_trials(const std::function<double()>& one_call, int* calls, double* seconds) {
  auto seen = [](const alg::TrialCounts& t) { return t.kept + t.dropped + t.taken + t.not_taken + t.spared + t.calls; };
  *calls = 0;
  *seconds = 0;
  for (int run = 0; run < kMostTrialCalls; run += kRunOutGroup) {
    const alg::TrialCounts before = alg::trial_counts();
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = bench::now();
    for (int i = 0; i < kRunOutGroup; ++i) one_call();
    const double group = max_over_ranks(bench::now() - t0);
    const alg::TrialCounts after = alg::trial_counts();
    const bool quiet = seen(after) == seen(before);
    if (all_ranks(quiet)) break;
    *calls += kRunOutGroup;
    *seconds += group;  // the slowest rank's: the same on every rank
    if (*seconds > 3.0) break;
  }
  if (*calls > 0) *seconds /= *calls;
}

// One collective shape on comm (collective over MPI_COMM_WORLD: every rank
// calls it, on its own `comm`). nullopt when Veneer would not take such a call.
std::optional<Row> check_collective(Collective c, int64_t target, MPI_Comm comm, const char* comm_name,
                                    const Options& o, Pattern pattern = Pattern::batch) {
  const veneer::topology::Hierarchy* h = veneer::topology::hierarchy(comm);
  if (!all_ranks(h != nullptr)) return std::nullopt;
  bench::Workload w(c, target, h->size, h->rank);
  const std::optional<alg::Shape> shape = alg::shape_of(w.call, *h);
  if (!all_ranks(shape.has_value())) return std::nullopt;
  std::vector<std::string> choices{"auto", "library"};
  for (const alg::Algorithm* a : alg::algorithms_for(c))
    if (alg::eligible(*a, *shape)) choices.emplace_back(a->name);
  const std::string label = std::string(alg::collective_name(c)) + " " + std::to_string(w.bytes) + " B on " + comm_name;
  alg::reset_trial_records();  // this shape's trials (trials_beside_batches)

  // The library's result, then every choice once through Veneer against it,
  // counting which algorithm actually ran.
  const std::vector<double> original = w.recv;
  std::vector<double> expected = original;
  w.call.rbuf = expected.data();
  call_collective(w.call, comm, false);
  const size_t compared =
      c == Collective::reduce_scatter_block ? static_cast<size_t>(w.call.count) * 8 : original.size() * 8;
  const bool mine_counts = !(c == Collective::reduce && h->rank != w.call.root);
  std::vector<std::string> valid;
  std::string auto_ran;
  counting(true);
  for (const std::string& choice : choices) {
    apply_collective(c, choice);
    alg::reset_collectives_counts();
    std::vector<double> got = original;
    w.call.rbuf = got.data();
    const int rc = call_collective(w.call, comm, true);
    const bool ok = rc == MPI_SUCCESS && (!mine_counts || std::memcmp(got.data(), expected.data(), compared) == 0);
    const std::string ran = counted_algorithm(c);
    if (!all_ranks(ok)) {
      fail(label + ": " + choice + " differs from the library's result");
      continue;
    }
    if (choice == "auto") auto_ran = ran;
    else if (ran != choice) {
      note(label + ": forcing " + choice + " ran " + (ran.empty() ? "nothing counted" : ran) + "; left out");
      continue;
    }
    valid.push_back(choice);
  }
  counting(false);
  w.call.rbuf = w.recv.data();
  if (valid.size() < 2 || valid[0] != "auto") {
    apply_collective(c, "auto");
    return std::nullopt;
  }

  // What the model predicts for the automatic choice (no override in force).
  apply_collective(c, "auto");
  // A rotating root: every call's root moved; barriers between: every call
  // follows one. The model is asked so.
  alg::Shape asked = *shape;
  asked.moving_root = pattern == Pattern::rotating_root && (c == Collective::bcast || c == Collective::reduce);
  asked.after_barrier = pattern == Pattern::barrier_between;
  const alg::Choice predicted = alg::choose(asked, alg::Tuning::from_env(), alg::cost_model());
  const std::string modelled(predicted.algorithm ? predicted.algorithm->name : std::string_view("library"));
  Row r;
  r.kind = "collective";
  r.what = std::string(alg::collective_name(c));
  r.comm = std::string(comm_name) + pattern_suffix(pattern);
  r.ranks = h->size;
  r.bytes = w.bytes;
  // A call's choice may depend on whether its root moved or a barrier came
  // before it, which for the counted call is whatever ran before it: the
  // model's choice for this pattern names it until the timed batches are
  // over (below).
  const bool by_pattern = asked.moving_root || asked.after_barrier;
  r.auto_choice = auto_ran.empty() || by_pattern ? modelled : auto_ran;
  r.auto_name = r.auto_choice;
  if (!auto_ran.empty() && auto_ran != r.auto_choice && !by_pattern) r.auto_name += " (model: " + modelled + ")";
  if (std::isfinite(predicted.predicted_seconds) && predicted.predicted_seconds > 0) {
    r.predicted = predicted.predicted_seconds;
    r.source = std::string(alg::source_name(predicted.source));
  }

  // Calls per batch from each choice's own time, so that every batch lasts
  // about as long: sized from the library's alone, a choice 5x faster than
  // a slow library ran batches of two calls, and the same algorithm timed
  // 1.2x apart under two names. Then interleaved batches.
  std::vector<int> iterations(valid.size());
  const bool rotate = pattern == Pattern::rotating_root && (c == Collective::bcast || c == Collective::reduce);
  const bool barrier = pattern == Pattern::barrier_between;
  // One call: the next root where it rotates (every rank counts the same
  // calls, so all agree on it), the barrier before it where barriers come
  // between; its own time, the barrier left out (OSU's measure).
  int turn = 0;
  auto one_call = [&]() -> double {
    if (rotate) w.call.root = turn++ % h->size;
    if (barrier) MPI_Barrier(comm);  // through Veneer, which notes it as an application's would be
    const double start = bench::now();
    call_collective(w.call, comm, true);
    return bench::now() - start;
  };
  if (!o.time_trials) run_out_trials(one_call, &r.trial_calls, &r.trial_seconds);
  for (size_t m = 0; m < valid.size(); ++m) {
    apply_collective(c, valid[m]);
    iterations[m] = iterations_for([&] { one_call(); }, o.batch_seconds, barrier ? 2000 : 20000);
  }
  // Each batch's time on each rank, per call: the whole batch (barriers
  // between included: what a loop of barrier and call takes, which a choice
  // that leaves the ranks apart makes the barrier wait for; MPICH on 3
  // ranks timed two_level's 128 B allreduce at 9.8 us a call against the
  // library's 11.4 and its loop at 18.2-19.3 us against 13.6-13.8), and,
  // where barriers come between, the calls alone (OSU's measure, taken on
  // the ranks' mean).
  std::vector<std::vector<double>> samples(valid.size()), calls_alone(valid.size());
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (const size_t m : bench::batch_order(valid.size(), rep)) {
      apply_collective(c, valid[m]);
      for (int root = 0; root < (rotate ? h->size : 1); ++root) one_call();  // decides (and warms)
      PMPI_Barrier(MPI_COMM_WORLD);
      double alone = 0;
      const double t0 = bench::now();
      for (int i = 0; i < iterations[m]; ++i) alone += one_call();
      samples[m].push_back((bench::now() - t0) / iterations[m]);
      calls_alone[m].push_back(alone / iterations[m]);
    }
  }
  // Where the pattern decides (a root that moved, a barrier before), the
  // automatic choice is named by what it ran after the timed batches: one
  // more batch, counted, untimed (a trial still running shows both sides).
  if (by_pattern) {
    apply_collective(c, "auto");
    counting(true);
    alg::reset_collectives_counts();
    for (int i = 0; i < iterations[0]; ++i) one_call();
    const std::string ran = counted_algorithms(c);
    counting(false);
    if (!ran.empty() && ran.find('+') == std::string::npos) r.auto_choice = ran;
    if (!ran.empty() && ran != modelled) r.auto_name = ran + " (model: " + modelled + ")";
  }
  w.call.root = 0;
  apply_collective(c, "auto");
  r.calls = *std::min_element(iterations.begin(), iterations.end());
  r.calls_most = *std::max_element(iterations.begin(), iterations.end());
  finish_row(r, valid, bench::slowest_rank(samples).medians);
  const std::vector<double> means = bench::mean_over_ranks(barrier ? calls_alone : samples).medians;
  r.mean_auto = means[0];
  r.mean_best = *std::min_element(means.begin() + 1, means.end());
  r.mean_seconds.assign(means.begin() + 1, means.end());
  r.trials = trials_beside_batches(c, rotate ? 1 : barrier ? 2 : 0, r);
  return r;
}

// ---- Typed point-to-point ----------------------------------------------------------

struct P2PCase {
  std::string name;
  std::function<bench::PackCase()> make;
};

// DDTBench layouts (bench/layouts.h) at halo-message sizes. Struct layouts are
// built relative to their first array (MPICH rejects MPI_BOTTOM in some calls).
std::vector<P2PCase> p2p_cases(bool quick) {
  const int64_t mg = quick ? 18 : 66;         // x face: (n-2)^2 single doubles (2 KiB / 32 KiB)
  const int64_t face = quick ? 128 : 1024;    // 2-D x face: n single doubles
  const int64_t lattice = quick ? 8 : 16;     // MILC: runs of L^2/2 sites of 24 bytes
  const int64_t atoms = quick ? 1000 : 8000;  // LAMMPS: a quarter of them, 8 doubles each
  return {
      {"nas-mg-x", [mg] { return bench::nas_mg('x', mg, mg, mg); }},
      {bench::grid_face_name(2, face, 1), [face] { return bench::grid_face(2, face, 1); }},
      {"milc-su3-zdown", [lattice] { return bench::milc_su3_zdown(lattice); }},
      {"lammps-full", [atoms] { return bench::lammps_full(atoms, false); }},
  };
}

// Two ranks of MPI_COMM_WORLD and where they run relative to each other.
struct Pair {
  int a = 0, b = 1;
  std::string name;  // "0<->1 same node"
};

// Ranks 0 and 1, and, when the job spans nodes, rank 0 and the first rank of
// the next node that is not already covered: one pair per peer level (the
// send rule differs by level). Collective over MPI_COMM_WORLD.
std::vector<Pair> p2p_pairs() {
  const veneer::topology::Hierarchy* h = veneer::topology::hierarchy(MPI_COMM_WORLD);
  auto level = [h](int a, int b) {
    return !h                                                                                   ? ""
           : h->node_of_rank[static_cast<size_t>(a)] == h->node_of_rank[static_cast<size_t>(b)] ? " same node"
                                                                                                : " other node";
  };
  std::vector<Pair> pairs{{0, 1, std::string("0<->1") + level(0, 1)}};
  if (h && h->node_count >= 2) {
    const bool first_is_remote = h->node_of_rank[0] != h->node_of_rank[1];
    for (int r = 1; r < h->size; ++r)
      if ((h->node_of_rank[static_cast<size_t>(r)] == h->node_of_rank[0]) == first_is_remote) {
        pairs.push_back({0, r, "0<->" + std::to_string(r) + level(0, r)});
        break;
      }
  }
  return pairs;
}

// Round trips between two ranks of one layout (typed on both sides):
// automatic send rule, forced take-over, forced pass-through. Every rank calls it.
std::optional<Row> check_p2p(const P2PCase& pc, const Pair& pair, const Options& o) {
  bench::PackCase layout = pc.make();
  const MPI_Datatype type = layout.type.get();
  const int count = layout.count;
  void* buf = const_cast<void*>(layout.origin);
  int type_size = 0;
  PMPI_Type_size(type, &type_size);
  const int64_t bytes = static_cast<int64_t>(type_size) * count;
  const int tag = 41;
  const std::string label = "p2p " + pc.name + " " + std::to_string(bytes) + " B (" + pair.name + ")";
  auto round_trip = [&](bool veneer) {
    auto send = veneer ? MPI_Send : PMPI_Send;
    auto recv = veneer ? MPI_Recv : PMPI_Recv;
    if (g_rank == pair.a) {
      send(buf, count, type, pair.b, tag, MPI_COMM_WORLD);
      recv(buf, count, type, pair.b, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (g_rank == pair.b) {
      recv(buf, count, type, pair.a, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      send(buf, count, type, pair.a, tag, MPI_COMM_WORLD);
    }
  };

  // Both directions, received into zeroed arrays, against the hand-written
  // pack of the same values (every rank fills its arrays alike).
  const std::vector<std::string> choices{"auto", "veneer", "library"};
  std::vector<std::string> valid;
  std::string auto_ran;
  counting(true);
  for (const std::string& choice : choices) {
    apply_p2p(choice);
    const uint64_t taken_before = veneer::counters().get(veneer::Counter::send_taken);
    bool ok = true;
    for (int receiver : {pair.b, pair.a}) {
      const int sender = receiver == pair.a ? pair.b : pair.a;
      if (g_rank == receiver) {
        std::vector<std::byte> expected(static_cast<size_t>(bytes)), got(static_cast<size_t>(bytes));
        layout.hand_pack(expected.data());
        for (bench::Buffer& a : layout.arrays) a.fill_bytes(0);
        ok = ok && MPI_Recv(buf, count, type, sender, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS;
        layout.hand_pack(got.data());
        ok = ok && std::memcmp(expected.data(), got.data(), expected.size()) == 0;
      } else if (g_rank == sender) {
        ok = ok && MPI_Send(buf, count, type, receiver, tag, MPI_COMM_WORLD) == MPI_SUCCESS;
      }
    }
    int taken = veneer::counters().get(veneer::Counter::send_taken) > taken_before ? 1 : 0;
    PMPI_Bcast(&taken, 1, MPI_INT, pair.a, MPI_COMM_WORLD);
    const std::string ran = taken ? "veneer" : "library";
    if (!all_ranks(ok)) {
      fail(label + ": " + choice + " received other data than was sent");
      continue;
    }
    if (choice == "auto") auto_ran = ran;
    else if (ran != choice) {
      note(label + ": forcing " + choice + " ran " + ran + "; left out");
      continue;
    }
    valid.push_back(choice);
  }
  counting(false);
  if (valid.size() < 2 || valid[0] != "auto") {
    apply_p2p("auto");
    return std::nullopt;
  }

  // Round trips per batch from the library's time.
  const int iterations = iterations_for([&] { round_trip(false); }, o.batch_seconds, 20000);
  double t0 = 0;
  std::vector<std::vector<double>> samples(valid.size());
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (const size_t m : bench::batch_order(valid.size(), rep)) {
      apply_p2p(valid[m]);
      round_trip(true);  // warm
      PMPI_Barrier(MPI_COMM_WORLD);
      t0 = bench::now();
      for (int i = 0; i < iterations; ++i) round_trip(true);
      // One-way time, as the pinging rank sees it (the other ranks wait).
      samples[m].push_back(g_rank == pair.a ? (bench::now() - t0) / iterations / 2 : 0.0);
    }
  }
  apply_p2p("auto");
  Row r;
  r.kind = "p2p";
  r.what = pc.name;
  r.comm = pair.name;
  r.ranks = 2;
  r.bytes = bytes;
  r.auto_name = r.auto_choice = auto_ran;
  r.calls = iterations;
  finish_row(r, valid, bench::slowest_rank(samples).medians);
  return r;
}

// ---- Summary -------------------------------------------------------------------------

std::string shape_name(const Row& r) {
  return (r.kind == "p2p" ? "p2p " : "") + r.what + " " + std::to_string(r.bytes) + " B (" + r.comm + ")";
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 1 : std::exp(s / static_cast<double>(v.size()));
}

// The trials beside the batches (Row::trials): how far a trial's ratio of
// its two sides is from the batches' (geometric: the median of
// max(trial/batch, batch/trial)), and how many pointed the other way by
// more than 10% each (a side ahead in the trial, behind in the batches).
void summarize_trials(const std::vector<Row>& rows) {
  std::vector<double> off;
  size_t wrong = 0, taken = 0;
  for (const Row& r : rows)
    for (const Row::TrialCheck& t : r.trials) {
      off.push_back(std::fabs(std::log(t.trial_ratio / t.batch_ratio)));
      wrong += (t.trial_ratio > 1.10 && t.batch_ratio < 1 / 1.10) || (t.trial_ratio < 1 / 1.10 && t.batch_ratio > 1.10);
      taken += t.taken;
    }
  if (off.empty()) return;
  std::sort(off.begin(), off.end());
  const double p90 = off[std::min(off.size() - 1, off.size() * 9 / 10)];
  std::printf(
      "  trials on these calls: %zu ended (%zu taken); their ratio of the two sides against the forced batches': "
      "%.2fx off (median), %.2fx (90th percentile), %zu of %zu the other way by more than 10%%\n",
      off.size(), taken, std::exp(bench::median_of(off)), std::exp(p90), wrong, off.size());
}

// What the automatic choice's trials cost, run out before its batches
// (run_out_trials): its calls then against the fastest forced choice's in
// the batches, and the time they added to the shape's calls in all.
void summarize_trial_calls(const std::vector<Row>& rows) {
  std::vector<double> slower;
  std::vector<int> calls;
  double added = 0;
  for (const Row& r : rows) {
    if (r.trial_calls <= 0 || r.best_seconds <= 0) continue;
    slower.push_back(std::log(r.trial_seconds / r.best_seconds));
    calls.push_back(r.trial_calls);
    added += std::max(0.0, r.trial_seconds - r.best_seconds) * r.trial_calls;
  }
  if (slower.empty()) return;
  double sum = 0;
  for (double s : slower) sum += s;
  std::printf(
      "  trials, run out before the timed batches: %zu shapes, %d-%d calls a shape, at %.2fx the fastest forced "
      "choice a call (geometric mean; %.2fx at most), %.1f ms added in all (once per shape in a job)\n",
      slower.size(), *std::min_element(calls.begin(), calls.end()), *std::max_element(calls.begin(), calls.end()),
      std::exp(sum / static_cast<double>(slower.size())), std::exp(*std::max_element(slower.begin(), slower.end())),
      added * 1e3);
}

void summarize(const std::vector<Row>& rows, double elapsed) {
  size_t within = 0, collectives = 0;
  double penalty = 0, slowdown = 0;
  const Row* worst = nullptr;
  std::vector<double> ratios;
  for (const Row& r : rows) {
    const double q = r.ratio();
    ratios.push_back(q);
    if (q <= 1.10) ++within;
    penalty += q - 1;
    slowdown += std::max(0.0, q - 1);
    if (!worst || q > worst->ratio()) worst = &r;
    if (r.kind == "collective") ++collectives;
  }
  const double n = static_cast<double>(rows.size());
  const double share = 100.0 * static_cast<double>(within) / n;
  std::printf("\nsummary over %zu shapes (%zu collective, %zu typed point-to-point):\n", rows.size(), collectives,
              rows.size() - collectives);
  std::printf("  automatic within 1.10x of the fastest forced choice: %zu of %zu (%.1f%%)\n", within, rows.size(),
              share);
  std::printf("  mean penalty (mean of auto/best - 1): %+.1f%% (slowdowns only: %+.1f%%)\n", 100 * penalty / n,
              100 * slowdown / n);
  std::printf("  worst auto/best: %.2fx, %s: automatic %s %s us, best %s %s us\n", worst->ratio(),
              shape_name(*worst).c_str(), worst->auto_name.c_str(), us(worst->auto_seconds).c_str(),
              worst->best_name.c_str(), us(worst->best_seconds).c_str());
  std::printf("  geometric mean of auto/best: %.3fx\n", geomean(ratios));
  for (const char* kind : {"collective", "p2p"}) {
    std::vector<double> mine;
    size_t ok = 0;
    double sum = 0;
    for (const Row& r : rows)
      if (r.kind == kind) {
        mine.push_back(r.ratio());
        ok += r.ratio() <= 1.10;
        sum += r.ratio() - 1;
      }
    if (mine.empty()) continue;
    std::printf("  %s: within 1.10x %zu of %zu, mean penalty %+.1f%%, worst %.2fx, geometric mean %.3fx\n",
                std::string(kind) == "p2p" ? "typed point-to-point" : "collectives", ok, mine.size(),
                100 * sum / static_cast<double>(mine.size()), *std::max_element(mine.begin(), mine.end()),
                geomean(mine));
  }
  // The collectives again on the ranks' mean, where the slowest rank (above)
  // and OSU's measure may part: a choice that lets some ranks leave early
  // trails on the one and leads on the other.
  std::vector<double> means;
  const Row* worst_mean = nullptr;
  for (const Row& r : rows)
    if (r.mean_best > 0) {
      means.push_back(r.mean_ratio());
      if (!worst_mean || r.mean_ratio() > worst_mean->mean_ratio()) worst_mean = &r;
    }
  if (worst_mean) {
    const auto ok = static_cast<size_t>(std::count_if(means.begin(), means.end(), [](double q) { return q <= 1.10; }));
    double sum = 0;
    for (double q : means) sum += q - 1;
    std::printf(
        "  collectives on the ranks' mean (OSU's measure): within 1.10x %zu of %zu, mean penalty %+.1f%%, worst "
        "%.2fx (%s), geometric mean %.3fx\n",
        ok, means.size(), 100 * sum / static_cast<double>(means.size()), worst_mean->mean_ratio(),
        shape_name(*worst_mean).c_str(), geomean(means));
  }
  // Prediction error of the automatic choice: geometric mean of |log(predicted/measured)|, per source.
  const char* sources[] = {"measured", "interpolated", "extrapolated", "fitted", "default"};
  double all_log = 0;
  size_t all_n = 0;
  std::string by_source;
  for (const char* s : sources) {
    double sum = 0;
    size_t k = 0;
    for (const Row& r : rows)
      if (r.predicted > 0 && r.source == s) {
        sum += std::fabs(std::log(r.predicted / r.auto_seconds));
        ++k;
      }
    if (!k) continue;
    all_log += sum;
    all_n += k;
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %zu (%.2fx)", by_source.empty() ? "" : ", ", s, k,
                  std::exp(sum / static_cast<double>(k)));
    by_source += part;
  }
  if (all_n)
    std::printf(
        "  prediction error of the automatic choice (geometric mean of max(pred/meas, meas/pred)): %.2fx over "
        "%zu shapes; by source: %s\n",
        std::exp(all_log / static_cast<double>(all_n)), all_n, by_source.c_str());
  else std::printf("  prediction error: no predictions\n");
  // Noise against the model: the automatic choice's algorithm was also timed
  // forced, in batches of its own. How far those two measurements of one
  // thing differ is the noise; a shape off by more than 1.10x whose forced
  // twin is within 1.10x of the best is a noisy miss, not a wrong pick.
  std::vector<double> twins;
  std::string picks;
  size_t misses = 0, wrong = 0;
  for (const Row& r : rows) {
    if (r.same_seconds > 0) twins.push_back(std::fabs(std::log(r.auto_seconds / r.same_seconds)));
    if (r.ratio() <= 1.10) continue;
    ++misses;
    if (r.same_seconds > 0 && r.same_seconds / r.best_seconds <= 1.10) continue;
    ++wrong;
    char part[160];
    std::snprintf(part, sizeof part, "%s%s %s/%s %.2fx", picks.empty() ? "" : ", ", shape_name(r).c_str(),
                  r.auto_choice.c_str(), r.best_name.c_str(),
                  r.same_seconds > 0 ? r.same_seconds / r.best_seconds : r.ratio());
    picks += part;
  }
  summarize_trials(rows);
  summarize_trial_calls(rows);
  if (!twins.empty()) {
    double sum = 0, most = 0;
    for (double t : twins) {
      sum += t;
      most = std::max(most, t);
    }
    std::printf(
        "  noise: the automatic choice timed again as a forced choice differs by %.2fx (geometric mean), "
        "%.2fx at most, over %zu shapes\n",
        std::exp(sum / static_cast<double>(twins.size())), std::exp(most), twins.size());
  }
  std::printf("  beyond 1.10x: %zu shapes; %zu of them also with the automatic choice forced (slower picks)%s%s\n",
              misses, wrong, picks.empty() ? "" : ": ", picks.c_str());
  std::printf("  elapsed: %.1f s\n", elapsed);
  std::printf("model-check: within-1.10x %.1f%%, worst %.2fx, geomean %.2fx\n", share, worst->ratio(), geomean(ratios));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const bool parsed = parse(argc, argv, o);  // before MPI_Init: --profile must be in place there
  // "auto" means Veneer's own rules: no override of collectives or sends.
  std::vector<std::string> cleared;
  for (int i = 0; i < alg::collective_count; ++i) {
    const std::string variable(alg::override_variable(static_cast<Collective>(i)));
    if (std::getenv(variable.c_str())) cleared.push_back(variable);
  }
  for (const char* variable : {"VENEER_P2P_MAX_BLOCK", "VENEER_P2P_MIN_BYTES", "VENEER_P2P"})
    if (std::getenv(variable)) cleared.emplace_back(variable);
  for (const std::string& variable : cleared) unsetenv(variable.c_str());
  if (const char* report = std::getenv("VENEER_REPORT")) g_user_report = report;

  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (!parsed || g_size < 2) {
    if (g_rank == 0) {
      if (g_size < 2) std::fprintf(stderr, "veneer-model-check: needs at least 2 ranks\n");
      std::fputs(kUsage, stderr);
    }
    MPI_Finalize();
    return 2;
  }
  alg::collectives_init();
  const double started = bench::now();
  const veneer::topology::Hierarchy* world = veneer::topology::hierarchy(MPI_COMM_WORLD);
  const std::string placement = bench::placement_warning(world && world->oversubscribed, bench::all_ranks_pinned());
  if (g_rank == 0) {
    std::printf("# veneer-model-check: %d ranks; %s\n", g_size, alg::profile_info().describe().c_str());
    if (!placement.empty()) std::printf("# warning: %s\n", placement.c_str());
    for (const std::string& variable : cleared)
      std::printf("# %s unset: the automatic choice is Veneer's own\n", variable.c_str());
    const veneer::Config& c = veneer::config();
    if (c.send_rules)
      std::printf("# sends: the profile's measured tables per peer level (same node: %s, other node: %s)\n",
                  c.send_rules->same_node ? "measured" : "none, passed",
                  c.send_rules->other_node ? "measured" : "none, passed");
    else
      std::printf("# sends: taken over up to a mean block of %lld bytes (%s), from %lld bytes\n",
                  static_cast<long long>(c.p2p_max_block),
                  std::string(veneer::origin_name(c.p2p_max_block_origin, "VENEER_P2P_MAX_BLOCK")).c_str(),
                  static_cast<long long>(c.p2p_min_bytes));
    if (!veneer::config().enabled || !veneer::config().collectives)
      std::printf("# Veneer or its collectives are switched off: every choice is the library\n");
    std::printf(
        "# per call: median of %d interleaved batches of ~%.1f ms, slowest rank (+bar: barrier to barrier); forced "
        "times: * fastest; automatic: %s\n",
        o.repetitions, o.batch_seconds * 1e3,
        o.time_trials ? "from its first calls, trials included" : "after its trials (reported apart)");
    print_header();
  }
  std::FILE* json = nullptr;
  if (g_rank == 0 && !o.json_path.empty()) {
    json = std::fopen(o.json_path.c_str(), "w");
    if (!json) std::fprintf(stderr, "veneer-model-check: cannot write %s\n", o.json_path.c_str());
  }

  std::vector<Row> rows;
  auto keep = [&](const std::optional<Row>& r) {
    if (!r || g_rank != 0) return;
    rows.push_back(*r);
    print_row(*r);
    if (json) write_json(json, *r);
  };
  struct Comm {
    MPI_Comm comm;
    const char* name;
  };
  std::vector<Comm> comms{{MPI_COMM_WORLD, "world"}};
  MPI_Comm half = MPI_COMM_NULL;
  if (o.split && g_size >= 4) {
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < g_size / 2 ? 0 : 1, g_rank, &half);
    comms.push_back({half, "half"});
  } else if (o.split && g_rank == 0) {
    std::printf("# --split needs at least 4 ranks; left out\n");
  }
  for (const Comm& comm : comms)
    for (Collective c : o.collectives) {
      const bool rooted = c == Collective::bcast || c == Collective::reduce;
      // --apps: rooted collectives with their root rotating, then every one with barriers between.
      std::vector<Pattern> patterns{Pattern::batch};
      if (o.apps)
        patterns = rooted ? std::vector<Pattern>{Pattern::rotating_root, Pattern::barrier_between}
                          : std::vector<Pattern>{Pattern::barrier_between};
      for (Pattern pattern : patterns)
        for (int64_t bytes : ladder(o.min_bytes, o.max_bytes, o.step))
          keep(check_collective(c, bytes, comm.comm, comm.name, o, pattern));
    }
  if (g_rank == 0) std::printf("# collectives: %.1f s\n", bench::now() - started);
  if (o.p2p)
    for (const Pair& pair : p2p_pairs())
      for (const P2PCase& pc : p2p_cases(o.quick)) keep(check_p2p(pc, pair, o));
  if (half != MPI_COMM_NULL) MPI_Comm_free(&half);
  if (json) std::fclose(json);

  int status = 0;
  if (g_rank == 0) {
    if (g_failed) {
      std::printf("model-check: FAILED: %s\n", g_failures.c_str());
      status = 1;
    } else if (rows.empty()) {
      std::printf("model-check: FAILED: no shape measured\n");
      status = 1;
    } else {
      summarize(rows, bench::now() - started);
    }
    std::fflush(stdout);
  }
  PMPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
