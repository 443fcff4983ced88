// SPDX-License-Identifier: BSD-3-Clause
// Loading the machine profile at MPI_Init (algorithms::load_profile, the call
// libveneer makes from MPI_Init): rank 0 reads and validates, every rank gets
// the same model. Missing, corrupt, outdated and foreign profiles fall back to
// the defaults with one warning and the job goes on; a valid profile only rank
// 0 can see still reaches every rank, and its measurements decide.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/decisions.h"
#include "algorithms/measured.h"
#include "algorithms/select.h"
#include "algorithms/trial.h"
#include "support/config.h"
#include "support/counters.h"
#include "test/collectives/harness.h"
#include "topology/hierarchy.h"
#include "topology/profile.h"

namespace veneer::test {
namespace {

// The per-algorithm counts are kept only while a report is wanted; Veneer
// reads the environment again at MPI_Init, which runs after this.
const bool g_report_on = [] { return setenv("VENEER_REPORT", "1", 1) == 0; }();
// These tests check where the model routes each call; trials of its choices
// on the job's own calls (algorithms/trial.h) are off except where a test
// turns them on.
const bool g_untried = [] { return setenv("VENEER_TRIAL", "0", 1) == 0; }();

namespace alg = veneer::algorithms;
namespace topo = veneer::topology;
using topo::ProfileStatus;

// A directory only this job uses, named by rank 0.
std::string job_directory() {
  char name[256] = {};
  if (world_rank() == 0)
    std::snprintf(name, sizeof name, "%s/veneer_profile_test_%d", ::testing::TempDir().c_str(), ::getpid());
  PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// This job's shape, as the calibration would have recorded it.
topo::CollectivePoint point_here(const char* collective, int64_t bytes,
                                 std::vector<std::pair<std::string, double>> times) {
  const topo::Hierarchy* h = topo::hierarchy(MPI_COMM_WORLD);
  topo::CollectivePoint p;
  p.collective = collective;
  p.ranks = h->size;
  p.nodes = h->node_count;
  p.ranks_per_node = h->max_ranks_per_node;
  p.min_ranks_per_node = h->min_ranks_per_node;
  p.node_consecutive = h->node_consecutive;
  p.bytes = bytes;
  for (auto& [name, seconds] : times) p.times.emplace_back(name, topo::Timing{seconds, 0.02});
  return p;
}

// A profile of this machine in which `fast` is `lead` times (twice) as fast as
// everything else for allreduce at 1-16 KiB; with `more_ranks`, timed on that
// many ranks more than this job has (a count the job's own is not).
topo::Profile profile_where(const std::string& fast, int more_ranks = 0, double lead = 2) {
  topo::Profile p;
  p.fingerprint = topo::current_fingerprint();
  p.created = topo::utc_timestamp();
  for (int64_t bytes : {int64_t{1024}, int64_t{4096}, int64_t{16384}}) {
    std::vector<std::pair<std::string, double>> times;
    const double base = 1e-5 * static_cast<double>(bytes) / 1024;
    for (const char* name : {"library", "recursive_doubling", "rabenseifner", "ring", "two_level", "lanes"})
      times.emplace_back(name, name == fast ? base / lead : base);
    topo::CollectivePoint pt = point_here("allreduce", bytes, times);
    pt.ranks += more_ranks;
    pt.ranks_per_node += more_ranks;
    pt.min_ranks_per_node += more_ranks;
    p.collectives.push_back(pt);
  }
  topo::LevelFit intra;
  intra.alpha = 1e-6;
  intra.beta = 1e-10;
  intra.gamma = 1e-10;
  intra.fit_error = 0.2;
  p.intra = intra;
  return p;
}

// The library's profile above, with bcast timed at 64 B and 4 KiB: the
// library twice as fast from a fixed root (a lead not thin: no challenger
// is tried), binomial with the root moving (MPICH's small broadcasts
// measured so).
topo::Profile profile_where_binomial_leads_a_moved_root() {
  topo::Profile prof = profile_where("library");
  for (int64_t bytes : {int64_t{64}, int64_t{4096}}) {
    topo::CollectivePoint pt = point_here("bcast", bytes, {});
    pt.times.emplace_back("library", topo::Timing{1e-6, 0.02, 0, 1.2e-6, 8e-6});
    pt.times.emplace_back("binomial", topo::Timing{2.4e-6, 0.02, 0, 2.5e-6, 3e-6});
    prof.collectives.push_back(pt);
  }
  return prof;
}

// profile_where(fast, more_ranks) with 256 KiB timed the same way (`fast`
// twice as fast as the others).
topo::Profile profile_with_256k_where(const std::string& fast, int more_ranks) {
  topo::Profile large = profile_where(fast, more_ranks);
  topo::CollectivePoint pt = large.collectives.back();
  pt.bytes = 262144;
  for (auto& [name, timing] : pt.times) timing.median *= 16;
  large.collectives.push_back(pt);
  return large;
}

// `p` with every time of `name` multiplied by `factor`.
topo::Profile with_times_scaled(topo::Profile p, std::string_view name, double factor) {
  for (topo::CollectivePoint& pt : p.collectives)
    for (auto& [n, timing] : pt.times)
      if (n == name) timing.median *= factor;
  return p;
}

// The model's choice, under the profile loaded, for an allreduce of 700
// doubles (allreduce_matches_library's calls) on h.
alg::Choice choice_for_700_doubles(const topo::Hierarchy& h) {
  return alg::choose(alg::shape_of(alg::Collective::allreduce, 700 * 8, h), alg::Tuning::from_env(), alg::cost_model());
}

// A 256 KiB allreduce of doubles on comm (round `round`'s values), checked
// against PMPI_Allreduce.
void large_allreduce_matches_library(MPI_Comm comm, int round) {
  constexpr int kCount = 32768;  // doubles: 256 KiB
  std::vector<double> in(kCount), out(kCount), ref(kCount);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<double>((i * 7 + static_cast<size_t>(round)) % 13 + static_cast<size_t>(world_rank()));
  ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), kCount, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
  PMPI_Allreduce(in.data(), ref.data(), kCount, MPI_DOUBLE, MPI_SUM, comm);
  ASSERT_EQ(out, ref) << "round " << round;
}

// VENEER_TRIAL set to `value` (null: unset), the configuration and the
// collectives' rules read again.
void set_trial(const char* value) {
  if (value) setenv("VENEER_TRIAL", value, 1);
  else unsetenv("VENEER_TRIAL");
  reload_config();
  alg::collectives_init();
}

// Calls of `collective` this rank counted for `algorithm` since the last reset.
uint64_t calls_of(alg::Collective collective, std::string_view algorithm) {
  for (const auto& e : alg::collectives_counts())
    if (e.collective == collective && e.algorithm == algorithm) return e.calls;
  return 0;
}

// Whether `mine` is the same on every rank of comm (every rank ran the same side).
bool same_on_every_rank(uint64_t mine, MPI_Comm comm) {
  uint64_t lowest = 0, highest = 0;
  PMPI_Allreduce(&mine, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
  PMPI_Allreduce(&mine, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
  return lowest == highest;
}

// One MPI_Allreduce of 700 doubles (values varying with `round`, modulo
// `modulus`) through Veneer on comm, checked against the library's.
void allreduce_matches_library(MPI_Comm comm, int round, int modulus) {
  std::vector<double> in(700), out(700), ref(700);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<double>((i + static_cast<size_t>(round)) % static_cast<size_t>(modulus) +
                                static_cast<size_t>(world_rank()));
  ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), 700, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
  PMPI_Allreduce(in.data(), ref.data(), 700, MPI_DOUBLE, MPI_SUM, comm);
  ASSERT_EQ(out, ref) << "round " << round;
}

// A duplicate of MPI_COMM_WORLD already seen by collectives: a
// communicator's first calls that Veneer would decide go to the library
// undecided (algorithms::kUndecidedCalls), so the calls a test counts are
// decided from the first. Those calls are the library's, counted, and leave
// nothing to recall.
MPI_Comm seen_duplicate() {
  MPI_Comm comm = MPI_COMM_NULL;
  EXPECT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  const uint64_t before = calls_of(alg::Collective::allreduce, "library");
  int one = 1, sum = 0;
  for (int k = 0; k < alg::kUndecidedCalls; ++k) {
    EXPECT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm), MPI_SUCCESS);
    EXPECT_EQ(sum, world_size());
  }
  EXPECT_EQ(calls_of(alg::Collective::allreduce, "library"), before + alg::kUndecidedCalls);
  const alg::Call call{
      .collective = alg::Collective::allreduce, .sbuf = &one, .rbuf = &sum, .count = 1, .type = MPI_INT, .op = MPI_SUM};
  EXPECT_EQ(alg::recall_decision(alg::decision_key(call, comm)), nullptr) << "an undecided call was remembered";
  return comm;
}

// A communicator of its own (its own trials) given its first `rounds` calls
// of allreduce_matches_library, the collectives' and trials' counts reset
// before, the side `slower` (nullptr: the library's calls) made to look a
// second slower a call while they run.
MPI_Comm first_rounds_with_slower(const alg::Algorithm* slower, int rounds) {
  MPI_Comm comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  alg::no_handicaps_for_testing();
  alg::handicap_for_testing(slower, 1.0);
  for (int round = 0; round < rounds; ++round) allreduce_matches_library(comm, round, 11);
  alg::no_handicaps_for_testing();
  return comm;
}

// Runs load_profile with VENEER_PROFILE=path (on rank 0; `others` elsewhere),
// capturing rank 0's log. Returns what it reported.
struct Loaded {
  alg::ProfileInfo info;
  std::string log;  // rank 0's stderr during the load
};

Loaded load(const std::string& path, const std::string& others = "", MPI_Comm comm = MPI_COMM_WORLD) {
  const std::string mine = world_rank() == 0 || others.empty() ? path : others;
  setenv("VENEER_PROFILE", mine.c_str(), 1);
  Loaded out;
  const std::string capture = job_directory() + "/stderr." + std::to_string(world_rank());
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::fopen(capture.c_str(), "w");
  if (f) dup2(fileno(f), 2);
  out.info = alg::load_profile(comm);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  if (f) std::fclose(f);
  std::ifstream in(capture);
  std::ostringstream text;
  text << in.rdbuf();
  out.log = text.str();
  std::remove(capture.c_str());
  unsetenv("VENEER_PROFILE");
  return out;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every rank holds the same status, and the same choice for a few shapes.
void expect_ranks_agree(const alg::ProfileInfo& info) {
  std::string mine = std::string(topo::status_name(info.status)) + "|" + info.fingerprint + "|";
  const topo::Hierarchy* h = topo::hierarchy(MPI_COMM_WORLD);
  std::vector<double> send(1 << 17, 1.0), recv(1 << 17);
  for (int count : {1, 128, 512, 2048, 1 << 17}) {
    alg::Call call;
    call.collective = alg::Collective::allreduce;
    call.sbuf = send.data();
    call.rbuf = recv.data();
    call.count = count;
    call.type = MPI_DOUBLE;
    call.op = MPI_SUM;
    mine += std::string(alg::chosen_for(call, *h)) + ",";
  }
  char theirs[512] = {};
  mine.copy(theirs, sizeof theirs - 1);
  PMPI_Bcast(theirs, sizeof theirs, MPI_CHAR, 0, MPI_COMM_WORLD);
  EXPECT_EQ(mine, std::string(theirs)) << "rank " << world_rank();
}

// The job goes on: an allreduce through Veneer's entry point matches the library's.
void expect_allreduce_works() {
  std::vector<double> in(700), out(700), ref(700);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i % 11 + world_rank());
  MPI_Allreduce(in.data(), out.data(), 700, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allreduce(in.data(), ref.data(), 700, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
}

class ProfileLoading : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = job_directory();
    if (world_rank() == 0) ::mkdir(dir_.c_str(), 0700);
    PMPI_Barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    PMPI_Barrier(MPI_COMM_WORLD);
    unsetenv("VENEER_P2P_MAX_BLOCK");
    unsetenv("VENEER_ALLTOALL_MAX_BLOCK");
    unsetenv("VENEER_PACK_MAX_BLOCK");
    reload_config();
    setenv("VENEER_PROFILE", "off", 1);  // back to the defaults for the next test
    alg::load_profile(MPI_COMM_WORLD);
    unsetenv("VENEER_PROFILE");
    if (world_rank() == 0) {
      for (const char* f : {"good.json", "corrupt.json", "types.json", "foreign.json", "outdated.json", "older.json",
                            "p2p.json", "no-p2p.json", "thin.json", "barriers.json", "other_count.json",
                            "other_count_large.json", "roots.json", "two_counts.json", "large_model.json"})
        std::remove((dir_ + "/" + f).c_str());
      ::rmdir(dir_.c_str());
    }
  }
  // Loads the profile where the library leads every algorithm by 1.3x (a
  // thin lead), and gives the model's choice for an allreduce of 700
  // doubles on MPI_COMM_WORLD.
  // The library 1.3x ahead of its challenger, the fastest of the others,
  // and 1.6x ahead of the rest (no next challenger).
  void load_thin_lead(alg::Choice* c) {
    topo::Profile prof = profile_where("library", 0, 1.3);
    ASSERT_EQ(load(file("thin.json", topo::profile_text(prof))).info.status, ProfileStatus::loaded);
    const topo::Hierarchy* world = topo::hierarchy(MPI_COMM_WORLD);
    ASSERT_NE(world, nullptr);
    const alg::Algorithm* first = choice_for_700_doubles(*world).challenger;
    ASSERT_NE(first, nullptr);
    for (topo::CollectivePoint& pt : prof.collectives)
      for (auto& [name, timing] : pt.times)
        if (name != "library" && name != first->name) timing.median *= 1.6 / 1.3;
    ASSERT_EQ(load(file("thin.json", topo::profile_text(prof))).info.status, ProfileStatus::loaded);
    *c = choice_for_700_doubles(*world);
    ASSERT_EQ(c->challenger, first);
  }
  // The thin lead's trial (load_thin_lead) with trials at their default:
  // the challenger's calls made to look 1 s a call, the library's
  // `library(round)` seconds on this rank. Asserts the trial runs to its
  // end (no take half way, 32 calls of each side), the challenger is not
  // taken, and the library serves the shape from then on, every rank alike.
  void thin_lead_challenger_not_taken(const std::function<double(int)>& library) {
    set_trial(nullptr);
    alg::Choice c;
    ASSERT_NO_FATAL_FAILURE(load_thin_lead(&c));
    ASSERT_EQ(c.algorithm, nullptr);
    ASSERT_NE(c.challenger, nullptr);
    const std::string name(c.challenger->name);
    auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
    MPI_Comm comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(c.challenger, 1.0);
    for (int round = 0; round < 64; ++round) {
      alg::handicap_for_testing(nullptr, library(round));
      allreduce_matches_library(comm, round, 11);
      if (round == 31) {
        EXPECT_EQ(alg::trial_counts().taken, 0u) << "taken half way";
      }
    }
    alg::no_handicaps_for_testing();
    EXPECT_EQ(calls(name.c_str()), 32u);
    EXPECT_EQ(calls("library"), 32u);
    EXPECT_EQ(alg::trial_counts().taken, 0u);
    EXPECT_EQ(alg::trial_counts().not_taken, 1u);
    for (int round = 64; round < 70; ++round) allreduce_matches_library(comm, round, 11);
    EXPECT_EQ(calls("library"), 38u);
    EXPECT_TRUE(same_on_every_rank(calls("library"), comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
    set_trial("0");
  }
  // Written by rank 0 only.
  std::string file(const char* name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    if (world_rank() == 0) write_file(path, text);
    PMPI_Barrier(MPI_COMM_WORLD);
    return path;
  }
  std::string dir_;
};

TEST_F(ProfileLoading, MissingFileAtTheDefaultPathIsOnlyInfo) {
  setenv("XDG_CACHE_HOME", (dir_ + "/cache").c_str(), 1);
  unsetenv("VENEER_PROFILE");
  alg::ProfileInfo info = alg::load_profile(MPI_COMM_WORLD);
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(info.status, ProfileStatus::missing);
  EXPECT_EQ(info.path, dir_ + "/cache/veneer/profile.json");
  EXPECT_EQ(alg::cost_model().measured, nullptr);
  EXPECT_FALSE(alg::cost_model().fitted_intra);
  expect_ranks_agree(info);
  // Named explicitly and missing: a warning.
  Loaded named = load(dir_ + "/nowhere.json");
  EXPECT_EQ(named.info.status, ProfileStatus::missing);
  if (world_rank() == 0) EXPECT_EQ(count_of(named.log, "machine profile not used"), 1) << named.log;
  else EXPECT_EQ(named.log, "");
  expect_allreduce_works();
}

TEST_F(ProfileLoading, BrokenProfilesFallBackToDefaultsWithOneWarning) {
  const std::string good = topo::profile_text(profile_where("two_level"));
  std::string types = good;
  types.replace(types.find("\"ranks\": "), 9, "\"ranks\": \"x\", \"r\": ");
  topo::Profile foreign = profile_where("two_level");
  foreign.fingerprint.cpu += " (another one)";
  topo::Profile older = profile_where("two_level");
  older.fingerprint.veneer = "0.0.1";
  std::string outdated = good;
  outdated.replace(outdated.find("\"version\": 1"), 12, "\"version\": 99");
  struct Case {
    std::string path;
    ProfileStatus status;
  };
  const std::vector<Case> cases = {
      {file("corrupt.json", good.substr(0, good.size() / 2)), ProfileStatus::corrupt},  // truncated
      {file("types.json", types), ProfileStatus::corrupt},
      {file("foreign.json", topo::profile_text(foreign)), ProfileStatus::foreign},
      {file("outdated.json", outdated), ProfileStatus::outdated},
      {file("older.json", topo::profile_text(older)), ProfileStatus::outdated},
      {dir_, ProfileStatus::unreadable},  // a directory
  };
  for (const Case& c : cases) {
    Loaded l = load(c.path);
    EXPECT_EQ(l.info.status, c.status) << c.path << ": " << l.info.why;
    EXPECT_EQ(alg::cost_model().measured, nullptr) << c.path;
    EXPECT_NE(l.info.describe().find("built-in defaults: "), std::string::npos) << l.info.describe();
    if (world_rank() == 0) EXPECT_EQ(count_of(l.log, "machine profile not used"), 1) << c.path << ": " << l.log;
    else EXPECT_EQ(l.log, "") << c.path;
    expect_ranks_agree(l.info);
    expect_allreduce_works();
  }
}

TEST_F(ProfileLoading, RankZerosProfileReachesEveryRank) {
  // Only rank 0 is pointed at the profile; the others at nothing.
  const std::string path = file("good.json", topo::profile_text(profile_where("two_level")));
  Loaded l = load(path, dir_ + "/not-there.json");
  ASSERT_EQ(l.info.status, ProfileStatus::loaded) << l.info.why;
  EXPECT_EQ(l.info.fingerprint, topo::current_fingerprint().digest());
  EXPECT_NE(alg::cost_model().measured, nullptr);
  EXPECT_TRUE(alg::cost_model().fitted_intra);
  EXPECT_DOUBLE_EQ(alg::cost_model().intra.alpha, 1e-6);
  EXPECT_EQ(l.log, "");  // loaded: info only
  expect_ranks_agree(l.info);
  expect_allreduce_works();
}

TEST_F(ProfileLoading, MeasurementsDecide) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  const topo::Hierarchy* h = topo::hierarchy(MPI_COMM_WORLD);
  std::vector<double> send(512, 1.0), recv(512);
  alg::Call call;
  call.collective = alg::Collective::allreduce;
  call.sbuf = send.data();
  call.rbuf = recv.data();
  call.count = 512;  // 4 KiB
  call.type = MPI_DOUBLE;
  call.op = MPI_SUM;
  const std::string two_level = file("good.json", topo::profile_text(profile_where("two_level")));
  ASSERT_EQ(load(two_level).info.status, ProfileStatus::loaded);
  EXPECT_EQ(alg::chosen_for(call, *h), "two_level");
  // Between measured sizes (interpolated) too.
  call.count = 256;
  EXPECT_EQ(alg::chosen_for(call, *h), "two_level");
  // And through the real entry point: counted as two_level, result exact.
  alg::reset_collectives_counts();
  expect_allreduce_works();  // 700 doubles: between 4 and 16 KiB
  uint64_t two_level_calls = 0;
  for (const auto& e : alg::collectives_counts())
    if (e.collective == alg::Collective::allreduce && e.algorithm == "two_level") two_level_calls = e.calls;
  EXPECT_EQ(two_level_calls, 1u);
  // A user rule still wins over the measurements.
  setenv("VENEER_ALLREDUCE", "0-inf:ring", 1);
  alg::collectives_init();
  EXPECT_EQ(alg::chosen_for(call, *h), "ring");
  unsetenv("VENEER_ALLREDUCE");
  alg::collectives_init();
  // Where the library measures fastest, the library.
  PMPI_Barrier(MPI_COMM_WORLD);
  const std::string library = file("good.json", topo::profile_text(profile_where("library")));
  ASSERT_EQ(load(library).info.status, ProfileStatus::loaded);
  call.count = 512;
  EXPECT_EQ(alg::chosen_for(call, *h), "library");
}

// A communicator's first collective calls that Veneer would decide go to
// the library undecided (kUndecidedCalls): nothing is remembered, no layout
// is learned; the next call is decided (two_level, measured faster), on
// every rank alike, and recalled after. A user's rule is obeyed from the
// first call. Every result is the library's.
TEST_F(ProfileLoading, ACommunicatorsFirstCallIsTheLibrarysUndecided) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("two_level")))).info.status, ProfileStatus::loaded);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (int pass = 0; pass < 3; ++pass) {  // freed and made again: seen afresh each time
    MPI_Comm comm = MPI_COMM_NULL;
    ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
    alg::reset_collectives_counts();
    for (int k = 0; k < alg::kUndecidedCalls; ++k) allreduce_matches_library(comm, pass + k, 13);
    EXPECT_EQ(calls("library"), static_cast<uint64_t>(alg::kUndecidedCalls)) << "pass " << pass;
    EXPECT_EQ(calls("two_level"), 0u) << "pass " << pass;
    EXPECT_EQ(topo::cached_hierarchy(comm), nullptr) << "pass " << pass << ": a layout was learned";
    for (int round = 1; round < 4; ++round) allreduce_matches_library(comm, pass + round, 13);
    EXPECT_EQ(calls("two_level"), 3u) << "pass " << pass;
    EXPECT_NE(topo::cached_hierarchy(comm), nullptr) << "pass " << pass;
    uint64_t mine = calls("two_level"), lowest = 0, highest = 0;
    PMPI_Allreduce(&mine, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
    PMPI_Allreduce(&mine, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
    EXPECT_EQ(lowest, highest) << "pass " << pass;
    PMPI_Comm_free(&comm);
  }
  // Rank 0's last undecided call went to the library before any decision
  // (as device memory it does not stage does, interposer/collectives.cpp)
  // while the others' passed undecided: the next call is decided on every rank.
  {
    MPI_Comm comm = MPI_COMM_NULL;
    ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
    for (int k = 1; k < alg::kUndecidedCalls; ++k) allreduce_matches_library(comm, k, 13);
    alg::reset_collectives_counts();
    if (world_rank() == 0) {
      std::vector<double> in(700, 1.0), out(700);
      ASSERT_EQ(PMPI_Allreduce(in.data(), out.data(), 700, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
      alg::seen_undecided({.collective = alg::Collective::allreduce,
                           .sbuf = in.data(),
                           .count = 700,
                           .type = MPI_DOUBLE,
                           .op = MPI_SUM},
                          comm);
    } else {
      allreduce_matches_library(comm, 0, 13);  // (its PMPI_Allreduce meets rank 0's second)
    }
    if (world_rank() == 0) {
      std::vector<double> in(700, 1.0), out(700);
      ASSERT_EQ(PMPI_Allreduce(in.data(), out.data(), 700, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
    }
    allreduce_matches_library(comm, 1, 13);
    EXPECT_EQ(calls("two_level"), 1u);
    PMPI_Comm_free(&comm);
  }
  // A user's rule: taken from the first call.
  setenv("VENEER_ALLREDUCE", "0-inf:ring", 1);
  alg::collectives_init();
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  alg::reset_collectives_counts();
  allreduce_matches_library(comm, 0, 13);
  EXPECT_EQ(calls("ring"), 1u);
  PMPI_Comm_free(&comm);
  unsetenv("VENEER_ALLREDUCE");
  alg::collectives_init();
  set_trial("0");
}

// Counts that change from call to call share the decision of their bucket
// (algorithms/collectives.h decision_count): 16 allreduces of 128-143
// doubles, each count once, are decided once, and all run two_level (the
// profile's choice at 1-16 KiB); the next bucket, 144-159, once more. A
// rule of the user's with a size boundary inside a bucket keeps the counts
// exact: 137 doubles (1,096 B) run the rule's ring, 138 (1,104 B) the
// model's two_level. Every result is the library's, every rank alike.
TEST_F(ProfileLoading, CountsOfOneBucketShareADecision) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("0");
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("two_level")))).info.status, ProfileStatus::loaded);
  auto decisions = [] {
    const alg::DecisionCounts d = alg::decision_counts();
    uint64_t n = d.forced;
    for (uint64_t k : d.by_source) n += k;
    return n;
  };
  auto allreduce = [](MPI_Comm comm, int count) {
    std::vector<double> in(static_cast<size_t>(count)), out(in.size()), ref(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i % 13 + static_cast<size_t>(world_rank()));
    ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
    PMPI_Allreduce(in.data(), ref.data(), count, MPI_DOUBLE, MPI_SUM, comm);
    ASSERT_EQ(out, ref) << count << " doubles";
  };
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  MPI_Comm comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_decision_counts();
  for (int count = 143; count >= 128; --count) allreduce(comm, count);
  EXPECT_EQ(decisions(), 1u);
  EXPECT_EQ(calls("two_level"), 16u);
  for (int count = 144; count < 160; ++count) allreduce(comm, count);
  EXPECT_EQ(decisions(), 2u);
  EXPECT_EQ(calls("two_level"), 32u);
  PMPI_Comm_free(&comm);

  setenv("VENEER_ALLREDUCE", "1000-1100:ring", 1);
  alg::collectives_init();
  comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_decision_counts();
  allreduce(comm, 137);
  allreduce(comm, 138);
  EXPECT_EQ(calls("ring"), 1u);
  EXPECT_EQ(calls("two_level"), 1u);
  EXPECT_EQ(decisions(), 2u);
  PMPI_Comm_free(&comm);
  unsetenv("VENEER_ALLREDUCE");
  alg::collectives_init();
}

// Bcast timed with the root fixed (back to back and between barriers) and
// rotating: the library wins from a fixed root, binomial with the root
// moving (MPICH's small broadcasts measured so). Calls through MPI_Bcast
// alternate between the two kinds; each call whose root differs from the
// previous one's runs binomial, the others the library, alike on every rank,
// and every rank receives the root's data.
TEST_F(ProfileLoading, ACallWhoseRootMovedGetsTheRotatingWinner) {
  const int p = world_size(), me = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  ASSERT_EQ(load(file("roots.json", topo::profile_text(profile_where_binomial_leads_a_moved_root()))).info.status,
            ProfileStatus::loaded);
  std::vector<int> buf(128);  // 512 B: between the measured sizes
  int round = 0;
  auto bcast_from = [&](int root) {
    ++round;
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = me == root ? static_cast<int>(i) * 3 + round : -1;
    ASSERT_EQ(MPI_Bcast(buf.data(), static_cast<int>(buf.size()), MPI_INT, root, MPI_COMM_WORLD), MPI_SUCCESS);
    for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], static_cast<int>(i) * 3 + round) << "round " << round;
  };
  auto count = [](const char* algorithm) { return calls_of(alg::Collective::bcast, algorithm); };
  bcast_from(0);  // whatever came before, the root is now 0
  alg::reset_collectives_counts();
  for (int k = 0; k < 3; ++k) bcast_from(0);  // the root stays: the library
  EXPECT_EQ(count("library"), 3u);
  EXPECT_EQ(count("binomial"), 0u);
  for (int k = 1; k <= 4; ++k) bcast_from(k % p);  // every call's root differs from the one before
  EXPECT_EQ(count("binomial"), 4u);
  for (int k = 0; k < 3; ++k) bcast_from(4 % p);  // the last root again, three times: the library
  EXPECT_EQ(count("library"), 6u);
  EXPECT_EQ(count("binomial"), 4u);
  // A reduce with its root moving on every call, after all this: exact.
  std::vector<int> in(64, me + 1), out(64, 0);
  for (int root = 0; root < p; ++root) {
    ASSERT_EQ(MPI_Reduce(in.data(), out.data(), 64, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD), MPI_SUCCESS);
    if (me == root)
      for (int v : out) ASSERT_EQ(v, p * (p + 1) / 2);
  }
}

// The library's profile above, with allgather timed back to back and one
// call between barriers at 64 B and 4 KiB a rank: the library wins the
// first way, ring the second (MPICH's small allgathers measured so, with
// two_level).
topo::Profile profile_where_ring_leads_between_barriers() {
  topo::Profile prof = profile_where("library");
  for (int64_t bytes : {int64_t{64}, int64_t{4096}}) {
    topo::CollectivePoint pt = point_here("allgather", bytes * world_size(), {});
    pt.times.emplace_back("library", topo::Timing{1e-6, 0.02, 0, 8e-6});
    pt.times.emplace_back("ring", topo::Timing{2e-6, 0.02, 0, 3e-6});
    prof.collectives.push_back(pt);
  }
  return prof;
}

// One MPI_Allgather of 32 ints a rank (128 B, between the measured sizes;
// values varying with `round`) through Veneer on comm; every rank receives
// every rank's block.
void allgather_matches(MPI_Comm comm, int round) {
  const int n = 32, p = world_size(), me = world_rank();
  std::vector<int> mine(n), all(static_cast<size_t>(n * p), -1);
  for (int i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = me * 1000 + i + round;
  ASSERT_EQ(MPI_Allgather(mine.data(), n, MPI_INT, all.data(), n, MPI_INT, comm), MPI_SUCCESS);
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(all[static_cast<size_t>(r * n + i)], r * 1000 + i + round) << "round " << round;
}

// `calls` allgathers on comm (allgather_matches, rounds after *round), a
// barrier before each: each the first since a barrier.
void allgathers_after_barriers(MPI_Comm comm, int calls, int* round) {
  for (int k = 0; k < calls; ++k) {
    ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
    allgather_matches(comm, ++*round);
  }
}

// Trials ended on this rank since the last reset, whatever their verdict.
uint64_t trials_ended() {
  const alg::TrialCounts t = alg::trial_counts();
  return t.kept + t.dropped + t.taken + t.not_taken;
}

// Allgather timed back to back and one call between barriers: the library
// wins the first way, ring the second (MPICH's small allgathers measured
// so, with two_level). The first allgather on a communicator since an
// MPI_Barrier there runs ring, every other one the library, alike on every
// rank; a barrier through PMPI_Barrier or on another communicator is not
// one. Every rank receives every rank's block.
TEST_F(ProfileLoading, TheFirstCallAfterABarrierGetsTheWinnerBetweenBarriers) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  // Ring is scored ahead by the slower of its two conditions and behind
  // back to back: by default the job's calls would try it (a thin lead,
  // AThinLeadOfTheLibrarysIsChallengedOnTheJobsCalls); here the routing
  // by pattern alone is checked.
  set_trial("0");
  ASSERT_EQ(load(file("barriers.json", topo::profile_text(profile_where_ring_leads_between_barriers()))).info.status,
            ProfileStatus::loaded);
  int round = 0;
  auto allgather = [&](MPI_Comm comm) { allgather_matches(comm, ++round); };
  auto count = [](const char* algorithm) {
    for (const auto& e : alg::collectives_counts())
      if (e.collective == alg::Collective::allgather && e.algorithm == algorithm) return e.calls;
    return uint64_t{0};
  };
  allgather(MPI_COMM_WORLD);  // decides (and from now on barriers are noted)
  allgather(MPI_COMM_WORLD);
  alg::reset_collectives_counts();
  for (int k = 0; k < 3; ++k) allgather(MPI_COMM_WORLD);  // back to back: the library
  EXPECT_EQ(count("library"), 3u);
  EXPECT_EQ(count("ring"), 0u);
  for (int k = 0; k < 3; ++k) {  // a barrier before each: ring
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
    allgather(MPI_COMM_WORLD);
  }
  EXPECT_EQ(count("ring"), 3u);
  allgather(MPI_COMM_WORLD);  // the second call since the barrier: the library
  EXPECT_EQ(count("library"), 4u);
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  allgather(MPI_COMM_WORLD);  // two barriers: one call after them
  EXPECT_EQ(count("ring"), 4u);
  PMPI_Barrier(MPI_COMM_WORLD);  // not seen by Veneer
  allgather(MPI_COMM_WORLD);
  MPI_Comm other = MPI_COMM_NULL;
  ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &other), MPI_SUCCESS);
  ASSERT_EQ(MPI_Barrier(other), MPI_SUCCESS);  // another communicator's barrier
  allgather(MPI_COMM_WORLD);
  EXPECT_EQ(count("library"), 6u);
  EXPECT_EQ(count("ring"), 4u);
  PMPI_Comm_free(&other);

  // A barrier counts on its own communicator's hierarchy, noted per thread
  // (algorithms::note_barrier) until the communicator is freed: on one made
  // after it (its handle often the freed one's), the first allgather after
  // a barrier runs ring again, the second the library.
  for (int made = 0; made < 2; ++made) {
    MPI_Comm comm = seen_duplicate();
    allgather(comm);  // decides
    alg::reset_collectives_counts();
    ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
    allgather(comm);
    allgather(comm);
    EXPECT_EQ(count("ring"), 1u) << "communicator " << made;
    EXPECT_EQ(count("library"), 1u) << "communicator " << made;
    ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);  // another communicator's, noted in turn
    ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
    allgather(comm);
    EXPECT_EQ(count("ring"), 2u) << "communicator " << made;
    PMPI_Comm_free(&comm);
  }
  // Barriers alternating between two communicators (rows and columns):
  // each counts on its own.
  MPI_Comm rows = seen_duplicate(), columns = seen_duplicate();
  allgather(rows);  // decides
  allgather(columns);
  alg::reset_collectives_counts();
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(MPI_Barrier(rows), MPI_SUCCESS);
    allgather(columns);  // no barrier on columns since its last call: the library
    ASSERT_EQ(MPI_Barrier(columns), MPI_SUCCESS);
    allgather(rows);     // ring
    allgather(columns);  // ring
  }
  EXPECT_EQ(count("ring"), 6u);
  EXPECT_EQ(count("library"), 3u);
  PMPI_Comm_free(&rows);
  PMPI_Comm_free(&columns);
}

// Barriers are counted on a communicator from the first decision about it
// that depends on them, at the same call on every one of its ranks. Ranks
// that made such a decision about another communicator, one the others are
// not in (here: rank 0 alone, as after its own sub-communicator's call),
// must not count this one's barriers before that: the first allgather after
// a barrier would be the first since a barrier on some ranks and not on the
// others, and run ring on some and the library on the others.
TEST_F(ProfileLoading, BarriersCountOnACommunicatorFromItsOwnFirstDecision) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("0");
  ASSERT_EQ(
      load(file("own_barriers.json", topo::profile_text(profile_where_ring_leads_between_barriers()))).info.status,
      ProfileStatus::loaded);
  MPI_Comm comm = seen_duplicate();
  int one = 1, sum = 0;  // a decision that does not depend on barriers: comm's hierarchy is built
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm), MPI_SUCCESS);
  ASSERT_NE(topo::cached_hierarchy(comm), nullptr);
  alg::g_barriers_matter.store(world_rank() == 0, std::memory_order_relaxed);
  const topo::Hierarchy* h = topo::cached_hierarchy(comm);
  for (int k = 0; k < 2; ++k) ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);  // the second through rank 0's note
  EXPECT_EQ(h->barriers.load(), 0u) << "barriers counted before a decision about comm depended on them";
  int round = 0;
  alg::reset_collectives_counts();
  allgather_matches(comm, ++round);  // decided here: ring or the library, alike on every rank
  ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
  EXPECT_EQ(h->barriers.load(), 1u);
  allgather_matches(comm, ++round);  // after a barrier counted on every rank: ring
  allgather_matches(comm, ++round);  // the library
  uint64_t ring = calls_of(alg::Collective::allgather, "ring"), all = ring;
  ASSERT_EQ(PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_UINT64_T, MPI_SUM, comm), MPI_SUCCESS);
  EXPECT_EQ(all, ring * static_cast<uint64_t>(world_size())) << "ranks ran ring on different calls";
  EXPECT_EQ(ring, 1u);
  PMPI_Comm_free(&comm);
}

// A trial of a call that is the first since a barrier counts the barrier
// before each call with the call (algorithms/collectives.h,
// note_barrier_seconds): what a side leaves the next barrier to wait for
// is its cost. The profile above (ring 2.7x ahead of the library between
// barriers), every choice tried (VENEER_TRIAL=8: two blocks of four a
// side, after 48 untimed calls of ring's); the library's calls made to
// look half a second slower; before each allgather a barrier, which the
// test makes out to have waited a second after each call of one side. Waiting after ring's calls, the
// library leads and serves the calls after barriers from then on (by its
// calls alone, ring would have led); waiting after the library's, ring
// stays. Every rank receives every rank's block.
TEST_F(ProfileLoading, ABarrierAfterATrialsCallIsChargedToItsSide) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("8");
  ASSERT_EQ(load(file("charged.json", topo::profile_text(profile_where_ring_leads_between_barriers()))).info.status,
            ProfileStatus::loaded);
  int round = 0;
  auto allgather = [&](MPI_Comm comm) { allgather_matches(comm, ++round); };
  auto ring_calls = [] { return calls_of(alg::Collective::allgather, "ring"); };
  for (const bool after_ring : {true, false}) {
    SCOPED_TRACE(after_ring ? "barriers wait after ring's calls" : "barriers wait after the library's calls");
    MPI_Comm comm = seen_duplicate();
    allgather(comm);  // decides (and from now on barriers are noted)
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(nullptr, 0.5);
    bool ring_ran = false;
    for (int k = 0; k < 80; ++k) {
      ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
      if (k > 0 && ring_ran == after_ring) alg::note_barrier_seconds(comm, 1.0);
      const uint64_t before = ring_calls();
      allgather(comm);
      ring_ran = ring_calls() > before;
    }
    alg::no_handicaps_for_testing();
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.dropped, after_ring ? 1u : 0u);
    EXPECT_EQ(ended.kept, after_ring ? 0u : 1u);
    const uint64_t before = ring_calls();
    allgathers_after_barriers(comm, 4, &round);
    EXPECT_EQ(ring_calls() - before, after_ring ? 0u : 4u);
    EXPECT_TRUE(same_on_every_rank(ring_calls(), comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  set_trial("0");
}

// A trial of calls that are each the first since a barrier (64 KiB or
// less) times none of its warm-up calls: six times its timed calls of each
// side, all of the model's choice (algorithms/trial.cpp, lead_calls_for).
// The profile above, VENEER_TRIAL=8 (48 untimed calls of ring's,
// then two blocks of four of each side); the library's calls made to look half a second
// slower; the barriers before ring's 48 warm-up calls made out to have
// waited a second each. Timed, they would return ring to the library; ring
// is kept, and serves the calls after barriers from then on. Every rank
// receives every rank's block.
TEST_F(ProfileLoading, AFirstSinceABarrierTrialTimesNoneOfItsWarmUpCalls) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("8");
  ASSERT_EQ(load(file("warm.json", topo::profile_text(profile_where_ring_leads_between_barriers()))).info.status,
            ProfileStatus::loaded);
  int round = 0;
  auto allgather = [&](MPI_Comm comm) { allgather_matches(comm, ++round); };
  auto ring_calls = [] { return calls_of(alg::Collective::allgather, "ring"); };
  MPI_Comm comm = seen_duplicate();
  allgather(comm);  // decides (and from now on barriers are noted)
  alg::reset_trial_counts();
  alg::no_handicaps_for_testing();
  alg::handicap_for_testing(nullptr, 0.5);
  const uint64_t first = ring_calls();
  for (int k = 0; k < 80; ++k) {
    ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
    if (k < 48) alg::note_barrier_seconds(comm, 1.0);
    allgather(comm);
    if (k == 47) EXPECT_EQ(ring_calls() - first, 48u) << "the model's choice warms up first";
  }
  alg::no_handicaps_for_testing();
  const alg::TrialCounts ended = alg::trial_counts();
  EXPECT_EQ(ended.kept, 1u);
  EXPECT_EQ(ended.dropped, 0u);
  const uint64_t before = ring_calls();
  allgathers_after_barriers(comm, 4, &round);
  EXPECT_EQ(ring_calls() - before, 4u);
  EXPECT_TRUE(same_on_every_rank(ring_calls(), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// Only a pattern's first trial after barriers is warmed up: the ones that
// follow it in its queue start timing at once (trial.cpp, warm_calls_for).
// The profile above with bruck timed between barriers too, between ring
// and the library (ring's fallback); VENEER_TRIAL=8. Ring's calls made to
// look a second slower: after its warm-up (48 calls of ring's) and
// two blocks of each, ring is returned to the library; bruck, tried next
// against the library (whose calls are then made to look half a second
// slower), takes the shape within the sixteen calls of its trial, with
// no warm-up before them. Every rank receives every rank's block.
// trial_counts() counts every call run in a trial, none after it ended
// (veneer-model-check waits on that).
TEST_F(ProfileLoading, ATrialAfterAnotherAfterBarriersIsNotWarmedAgain) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("8");
  topo::Profile profile = profile_where_ring_leads_between_barriers();
  for (topo::CollectivePoint& pt : profile.collectives)
    if (pt.collective == "allgather") pt.times.emplace_back("bruck", topo::Timing{2e-6, 0.02, 0, 5e-6});
  ASSERT_EQ(load(file("follows.json", topo::profile_text(profile))).info.status, ProfileStatus::loaded);
  const alg::Algorithm* ring = alg::find_algorithm(alg::Collective::allgather, "ring");
  ASSERT_NE(ring, nullptr);
  int round = 0;
  MPI_Comm comm = seen_duplicate();
  allgathers_after_barriers(comm, 1, &round);  // decides (and from now on barriers are noted)
  alg::reset_trial_counts();
  alg::no_handicaps_for_testing();
  alg::handicap_for_testing(ring, 1.0);
  int calls = 0;
  while (trials_ended() < 1 && calls < 100) {
    allgathers_after_barriers(comm, 1, &round);
    ++calls;
  }
  EXPECT_EQ(calls, 64) << "48 untimed calls of ring's, then two blocks of four of each side";
  EXPECT_EQ(alg::trial_counts().dropped, 1u);
  EXPECT_EQ(alg::trial_counts().calls, 64u) << "every call of the trial counted";
  alg::no_handicaps_for_testing();
  alg::handicap_for_testing(nullptr, 0.5);
  calls = 0;
  while (trials_ended() < 2 && calls < 100) {
    allgathers_after_barriers(comm, 1, &round);
    ++calls;
  }
  alg::no_handicaps_for_testing();
  EXPECT_LE(calls, 16) << "the fallback's trial timed from its first block";
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  EXPECT_EQ(alg::trial_counts().calls, 64u + static_cast<uint64_t>(calls));
  const uint64_t before = calls_of(alg::Collective::allgather, "bruck");
  allgathers_after_barriers(comm, 4, &round);
  EXPECT_EQ(alg::trial_counts().calls, 64u + static_cast<uint64_t>(calls)) << "none once it ended";
  EXPECT_EQ(calls_of(alg::Collective::allgather, "bruck") - before, 4u);
  EXPECT_TRUE(same_on_every_rank(calls_of(alg::Collective::allgather, "bruck"), comm))
      << "every rank runs the same side";
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// A profile whose point-to-point section says Veneer pays up to `intra` bytes
// of block within a node (and `inter` between nodes, when given).
topo::Profile profile_with_p2p(int64_t intra, std::optional<int64_t> inter = std::nullopt) {
  topo::Profile p = profile_where("library");
  topo::P2pProfile section;
  topo::P2pPoint point;
  point.block = 8;
  point.bytes = 65536;
  point.library = {2e-5, 0.01};
  point.veneer = {1e-5, 0.01};
  section.intra = topo::P2pLevel{intra, {point}};
  if (inter) section.inter = topo::P2pLevel{*inter, {point}};
  section.pack = topo::P2pLevel{64, {point}};
  p.p2p = section;
  return p;
}

// Every rank holds the same thresholds (and origins). The Alltoallv/w one is
// never the profile's: its blocks share one staging buffer and one library
// call, so the typed send's break-even does not apply (algorithms/measured.cpp).
void expect_thresholds_everywhere(int64_t p2p, int64_t alltoall, ThresholdOrigin origin) {
  const Config& c = config();
  EXPECT_EQ(c.p2p_max_block, p2p) << "rank " << world_rank();
  EXPECT_EQ(c.alltoall_max_block, alltoall) << "rank " << world_rank();
  EXPECT_EQ(c.p2p_max_block_origin, origin) << "rank " << world_rank();
  EXPECT_EQ(c.alltoall_max_block_origin, ThresholdOrigin::built_in) << "rank " << world_rank();
  long long mine[4] = {c.p2p_max_block, c.alltoall_max_block, static_cast<long long>(c.p2p_max_block_origin),
                       static_cast<long long>(c.alltoall_max_block_origin)};
  long long lo[4], hi[4];
  PMPI_Allreduce(mine, lo, 4, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(mine, hi, 4, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lo[i], hi[i]) << "ranks disagree on field " << i;
}

// Sends a vector of 16-byte blocks from rank 0 to rank 1 through Veneer's
// entry points; rank 1 checks the data against what rank 0 sent. Returns
// whether rank 0's send was taken over (the same answer on every rank).
bool send_strided_16() {
  MPI_Datatype vec;
  PMPI_Type_vector(64, 2, 4, MPI_DOUBLE, &vec);  // 16-byte blocks, stride 32 bytes
  MPI_Type_commit(&vec);
  std::vector<double> buf(256, -1.0);
  long long taken = 0;
  if (world_rank() == 0) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<double>(i);
    const uint64_t before = counters().get(Counter::send_taken);
    EXPECT_EQ(MPI_Send(buf.data(), 1, vec, 1, 31, MPI_COMM_WORLD), MPI_SUCCESS);
    taken = counters().get(Counter::send_taken) > before ? 1 : 0;
  } else if (world_rank() == 1) {
    EXPECT_EQ(PMPI_Recv(buf.data(), 1, vec, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    for (size_t i = 0; i < buf.size(); ++i)
      EXPECT_EQ(buf[i], i % 4 < 2 ? static_cast<double>(i) : -1.0) << "element " << i;
  }
  PMPI_Bcast(&taken, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  MPI_Type_free(&vec);
  return taken != 0;
}

TEST_F(ProfileLoading, P2pSectionSetsTheThresholdsOnEveryRank) {
  // The built-in thresholds, as a profile without the section leaves them.
  const std::string plain = file("no-p2p.json", topo::profile_text(profile_where("library")));
  ASSERT_EQ(load(plain).info.status, ProfileStatus::loaded);
  const int64_t built_in = config().p2p_max_block, built_in_alltoall = config().alltoall_max_block;
  expect_thresholds_everywhere(built_in, built_in_alltoall, ThresholdOrigin::built_in);
  // Only rank 0 sees the profile; every rank takes its thresholds.
  const std::string path = file("p2p.json", topo::profile_text(profile_with_p2p(4096)));
  Loaded l = load(path, dir_ + "/not-there.json");
  ASSERT_EQ(l.info.status, ProfileStatus::loaded) << l.info.why;
  expect_thresholds_everywhere(4096, built_in_alltoall, ThresholdOrigin::profile);
  if (world_size() >= 2) EXPECT_TRUE(send_strided_16());  // 16-byte blocks: taken over, data exact
  // Measured never to pay: nothing is taken over.
  file("p2p.json", topo::profile_text(profile_with_p2p(0)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  expect_thresholds_everywhere(0, built_in_alltoall, ThresholdOrigin::profile);
  if (world_size() >= 2) EXPECT_FALSE(send_strided_16());
  // Between nodes, where measured, decides.
  file("p2p.json", topo::profile_text(profile_with_p2p(512, 32)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  expect_thresholds_everywhere(32, built_in_alltoall, ThresholdOrigin::profile);
  // A profile without the section puts the built-in default back.
  ASSERT_EQ(load(plain).info.status, ProfileStatus::loaded);
  expect_thresholds_everywhere(built_in, built_in_alltoall, ThresholdOrigin::built_in);
  // And so does a profile that is not taken.
  file("p2p.json", topo::profile_text(profile_with_p2p(4096)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  ASSERT_EQ(load(dir_ + "/nowhere.json").info.status, ProfileStatus::missing);
  expect_thresholds_everywhere(built_in, built_in_alltoall, ThresholdOrigin::built_in);
}

TEST_F(ProfileLoading, UsersThresholdWinsOverTheProfile) {
  setenv("VENEER_P2P_MAX_BLOCK", "0", 1);  // as if set for the whole job, read at MPI_Init
  reload_config();
  const std::string path = file("p2p.json", topo::profile_text(profile_with_p2p(4096)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  const Config& c = config();
  EXPECT_EQ(c.p2p_max_block, 0);
  EXPECT_EQ(c.p2p_max_block_origin, ThresholdOrigin::environment);
  EXPECT_EQ(c.alltoall_max_block, VENEER_DEFAULT_ALLTOALL_MAX_BLOCK);  // never the profile's
  EXPECT_EQ(c.alltoall_max_block_origin, ThresholdOrigin::built_in);
  if (world_size() >= 2) EXPECT_FALSE(send_strided_16());
}

// Packs `count` doubles in blocks of `block` doubles (stride twice the block)
// through MPI_Pack, checks the bytes against the library's, and says whether
// Veneer took the call.
bool pack_taken(int block, int count = 1) {
  MPI_Datatype vec;
  if (block > 0) {
    PMPI_Type_vector(8, block, 2 * block, MPI_DOUBLE, &vec);
  } else {
    PMPI_Type_contiguous(16, MPI_DOUBLE, &vec);  // one run of 128 bytes
  }
  MPI_Type_commit(&vec);
  std::vector<double> src(static_cast<size_t>(16 * std::max(block, 1) * count + 64));
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.25 * static_cast<double>(i);
  int bytes = 0;
  PMPI_Pack_size(count, vec, MPI_COMM_WORLD, &bytes);
  std::vector<char> mine(static_cast<size_t>(bytes)), ref(static_cast<size_t>(bytes));
  int pos = 0, ref_pos = 0;
  const uint64_t before = counters().get(Counter::pack_taken);
  EXPECT_EQ(MPI_Pack(src.data(), count, vec, mine.data(), bytes, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
  const bool taken = counters().get(Counter::pack_taken) > before;
  PMPI_Pack(src.data(), count, vec, ref.data(), bytes, &ref_pos, MPI_COMM_WORLD);
  EXPECT_EQ(pos, ref_pos);
  EXPECT_EQ(mine, ref) << "block " << block;
  MPI_Type_free(&vec);
  return taken;
}

TEST_F(ProfileLoading, PackSectionSetsThePackThreshold) {
  const std::string plain = file("no-p2p.json", topo::profile_text(profile_where("library")));
  ASSERT_EQ(load(plain).info.status, ProfileStatus::loaded);
  EXPECT_EQ(config().pack_max_block, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::built_in);
  EXPECT_TRUE(pack_taken(2));
  EXPECT_TRUE(pack_taken(16));  // without a profile every decoded type is packed by Veneer
  // The profile's pack table measured a gain up to 64-byte blocks.
  const std::string path = file("p2p.json", topo::profile_text(profile_with_p2p(4096)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  EXPECT_EQ(config().pack_max_block, 64);
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::profile);
  long long mine = config().pack_max_block, lo = 0, hi = 0;
  PMPI_Allreduce(&mine, &lo, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&mine, &hi, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks disagree on the pack threshold";
  EXPECT_TRUE(pack_taken(2));    // 16-byte blocks
  EXPECT_TRUE(pack_taken(8));    // 64-byte blocks
  EXPECT_FALSE(pack_taken(16));  // 128-byte blocks: the library's
  EXPECT_TRUE(pack_taken(0));    // one run of 128 bytes: always a memcpy of Veneer's
  EXPECT_TRUE(pack_taken(0, 3));
  // The user's variable wins.
  setenv("VENEER_PACK_MAX_BLOCK", "inf", 1);
  reload_config();
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::environment);
  EXPECT_TRUE(pack_taken(16));
  unsetenv("VENEER_PACK_MAX_BLOCK");
  reload_config();
  EXPECT_FALSE(pack_taken(16));
  ASSERT_EQ(load(plain).info.status, ProfileStatus::loaded);
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::built_in);
}

// A communicator whose rank the library will not tell (here MPI_COMM_NULL, with
// errors returned): no rank 0 to follow, so every rank keeps the built-in
// model and thresholds, with one warning, and never joins a broadcast.
TEST_F(ProfileLoading, RankTheLibraryWillNotTellKeepsTheDefaults) {
  const std::string plain = file("no-p2p.json", topo::profile_text(profile_where("library")));
  ASSERT_EQ(load(plain).info.status, ProfileStatus::loaded);
  const int64_t built_in = config().p2p_max_block, built_in_alltoall = config().alltoall_max_block;
  const std::string path = file("p2p.json", topo::profile_text(profile_with_p2p(4096)));
  ASSERT_EQ(load(path).info.status, ProfileStatus::loaded);
  expect_thresholds_everywhere(4096, built_in_alltoall, ThresholdOrigin::profile);
  // Errors on MPI_COMM_NULL reach the handler of MPI_COMM_WORLD or MPI_COMM_SELF, depending on the library.
  ASSERT_EQ(PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
  const Loaded l = load(path, "", MPI_COMM_NULL);
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
  EXPECT_EQ(l.info.status, ProfileStatus::unreadable);
  EXPECT_FALSE(l.info.loaded());
  EXPECT_EQ(count_of(l.log, "MPI_Comm_rank failed"), 1) << l.log;
  expect_thresholds_everywhere(built_in, built_in_alltoall, ThresholdOrigin::built_in);
  EXPECT_EQ(config().pack_max_block_origin, ThresholdOrigin::built_in);
  expect_allreduce_works();
}

// Trials (algorithms/trial.h): the model's choice (two_level, measured
// twice as fast as the library) runs a block of four calls, then the
// library a block of four (VENEER_TRIAL=4: one block each); after that one
// side serves every call, the same on every rank (which side is this
// machine's timing: not asserted). A rule's choice is not tried. Every
// result is the library's.
TEST_F(ProfileLoading, TheModelsChoiceIsTriedOnTheJobsOwnCalls) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("4");
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("two_level")))).info.status, ProfileStatus::loaded);
  MPI_Comm comm = seen_duplicate();  // its own trials
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  auto allreduce = [&](int round) { allreduce_matches_library(comm, round, 13); };
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  for (int round = 0; round < 8; ++round) allreduce(round);  // a block of each
  EXPECT_EQ(calls("two_level"), 4u);
  EXPECT_EQ(calls("library"), 4u);
  const alg::TrialCounts ended = alg::trial_counts();
  EXPECT_EQ(ended.kept + ended.dropped, 1u);
  for (int round = 8; round < 14; ++round) allreduce(round);
  const uint64_t after = calls("two_level");
  EXPECT_TRUE(after == 4u || after == 10u) << after;
  EXPECT_EQ(after == 10u, ended.kept == 1u);
  uint64_t lowest = 0, highest = 0;
  PMPI_Allreduce(&after, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
  PMPI_Allreduce(&after, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
  EXPECT_EQ(lowest, highest) << "every rank runs the same side";
  EXPECT_EQ(alg::trial_counts().kept + alg::trial_counts().dropped, 1u);

  // A rule's choice runs from the first call.
  setenv("VENEER_ALLREDUCE", "0-inf:ring", 1);
  alg::collectives_init();
  alg::reset_collectives_counts();
  for (int round = 0; round < 5; ++round) allreduce(round);
  EXPECT_EQ(calls("ring"), 5u);
  unsetenv("VENEER_ALLREDUCE");
  alg::collectives_init();

  // Off: the model's choice from the first call.
  set_trial("0");
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("two_level")))).info.status, ProfileStatus::loaded);
  alg::reset_collectives_counts();
  for (int round = 0; round < 5; ++round) allreduce(round);
  EXPECT_EQ(calls("two_level"), 5u);
  PMPI_Comm_free(&comm);
}

// A rank count the profile did not time (trials at their default,
// VENEER_TRIAL unset): the profile timed allreduce on one rank more than
// this job has, two_level twice as fast as the library there. The model
// keeps the library here (no agreement of several counts), and the job's
// own calls try two_level against it: 32 calls each (8 blocks of four, the
// library's first; 16 where the verdict was plain half way), then one
// side, the same on every rank. Calls this
// small (5,600 B, up to 8 KiB) then try a third, the formulas' fastest of
// the rest (here made to look a second slower a call: it loses half way,
// after 16 calls of each side). On the count the profile timed, its choice
// runs from the first call, untried. Every result is the library's.
TEST_F(ProfileLoading, ARankCountTheProfileDidNotTimeIsTriedOnTheJobsCalls) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  const topo::Profile other_count = profile_where("two_level", 1);
  ASSERT_EQ(load(file("other_count.json", topo::profile_text(other_count))).info.status, ProfileStatus::loaded);
  MPI_Comm comm = MPI_COMM_NULL;
  comm = seen_duplicate();
  const topo::Hierarchy* h = topo::hierarchy(comm);
  ASSERT_NE(h, nullptr);
  const alg::Choice choice =
      alg::choose(alg::shape_of(alg::Collective::allreduce, 5600, *h), alg::Tuning::from_env(), alg::cost_model());
  ASSERT_NE(choice.challenger, nullptr);
  ASSERT_EQ(choice.challenger->name, "two_level");
  ASSERT_NE(choice.third_challenger, nullptr);
  const alg::Algorithm* third = choice.third_challenger;
  auto calls = [](std::string_view algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  auto allreduce = [&](int round) { allreduce_matches_library(comm, round, 11); };
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  alg::handicap_for_testing(third, 1.0);
  for (int round = 0; round < 4; ++round) allreduce(round);  // the model's choice first
  EXPECT_EQ(calls("library"), 4u);
  EXPECT_EQ(calls("two_level"), 0u);
  // 32 calls of each side, or 16 of each where the verdict was plain half
  // way; then the third's 16 against the side taken.
  for (int round = 4; round < 96; ++round) allreduce(round);
  alg::no_handicaps_for_testing();
  const alg::TrialCounts ended = alg::trial_counts();
  EXPECT_EQ(ended.kept + ended.dropped, 0u);
  EXPECT_EQ(ended.taken + ended.not_taken, 2u);
  EXPECT_EQ(calls(third->name), 16u);
  EXPECT_GE(calls("two_level"), 16u);
  EXPECT_EQ(calls("two_level") + calls("library") + calls(third->name), 96u);
  const uint64_t before = calls("two_level");
  for (int round = 96; round < 102; ++round) allreduce(round);
  const uint64_t after = calls("two_level");
  EXPECT_EQ(after, ended.taken == 1u ? before + 6 : before);
  EXPECT_EQ(calls(third->name), 16u);
  uint64_t lowest = 0, highest = 0;
  PMPI_Allreduce(&after, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
  PMPI_Allreduce(&after, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
  EXPECT_EQ(lowest, highest) << "every rank runs the same side";
  PMPI_Comm_free(&comm);

  // The count the profile timed: the model's choice from the first call.
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("two_level")))).info.status, ProfileStatus::loaded);
  comm = seen_duplicate();
  alg::reset_collectives_counts();
  for (int round = 0; round < 5; ++round) allreduce(round);
  EXPECT_EQ(calls("two_level"), 5u);
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// A thin lead on the count the profile timed (trials at their default,
// VENEER_TRIAL unset): two_level measured 1.4x ahead of the library is
// still tried on the job's own calls (algorithms/collectives.cpp,
// kThinLead; TrialRole::thin), 32 calls each side. Its calls made to look a
// second slower (a millisecond was within what a descheduled rank adds to
// a block on an oversubscribed machine), the library leads and serves the
// shape from then on; the library's calls made slower, two_level stays. A 2x lead runs from
// the first call, untried (ARankCountTheProfileDidNotTime... above). Every
// result is the library's, every rank alike.
TEST_F(ProfileLoading, AThinLeadOnATimedCountIsTriedOnTheJobsCalls) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("thin.json", topo::profile_text(profile_where("two_level", 0, 1.4)))).info.status,
            ProfileStatus::loaded);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  ASSERT_NE(two_level, nullptr);
  for (const bool library_leads : {true, false}) {
    SCOPED_TRACE(library_leads ? "the library leads" : "two_level leads");
    MPI_Comm comm = first_rounds_with_slower(library_leads ? two_level : nullptr, 64);
    EXPECT_EQ(calls("two_level"), 32u);
    EXPECT_EQ(calls("library"), 32u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.dropped, library_leads ? 1u : 0u);
    EXPECT_EQ(ended.kept, library_leads ? 0u : 1u);
    for (int round = 64; round < 70; ++round) allreduce_matches_library(comm, round, 11);
    const uint64_t after = calls("two_level");
    EXPECT_EQ(after, library_leads ? 32u : 38u);
    uint64_t lowest = 0, highest = 0;
    PMPI_Allreduce(&after, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
    PMPI_Allreduce(&after, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
    EXPECT_EQ(lowest, highest) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  set_trial("0");
}

// The model's choice returned to the library by its trial, the next
// fastest is tried against the library (Choice::fallback): two_level
// measured 1.4x ahead of the library (a thin lead, tried), ring 1.2x. With
// two_level's calls made to look 2 s slower and the library's 1 s, the
// library leads two_level's trial (32 calls a side) and ring, tried next
// as a challenger to a thin lead, leads the library and serves the shape
// from then on; with ring's calls made 1 s slower as well, ring is not
// taken and the library serves it. Where the library leads every other
// algorithm by 1.6x (kThinLead or more), none is named. Every result is
// the library's, every rank alike.
TEST_F(ProfileLoading, TheNextFastestIsTriedWhereTheModelsChoiceIsReturned) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  topo::Profile prof = with_times_scaled(profile_where("two_level", 0, 1.4), "ring", 1 / 1.2);
  ASSERT_EQ(load(file("fallback.json", topo::profile_text(prof))).info.status, ProfileStatus::loaded);
  const topo::Hierarchy* world = topo::hierarchy(MPI_COMM_WORLD);
  ASSERT_NE(world, nullptr);
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  const alg::Algorithm* ring = alg::find_algorithm(alg::Collective::allreduce, "ring");
  ASSERT_NE(two_level, nullptr);
  ASSERT_NE(ring, nullptr);
  auto choice = [&] { return choice_for_700_doubles(*world); };
  const alg::Choice c = choice();
  EXPECT_EQ(c.algorithm, two_level);
  EXPECT_TRUE(c.thin_lead);
  EXPECT_EQ(c.fallback, ring);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (const bool ring_leads : {true, false}) {
    SCOPED_TRACE(ring_leads ? "ring leads the library" : "the library leads ring");
    MPI_Comm comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(two_level, 2.0);
    alg::handicap_for_testing(nullptr, 1.0);
    if (!ring_leads) alg::handicap_for_testing(ring, 2.0);
    for (int round = 0; round < 100; ++round) allreduce_matches_library(comm, round, 11);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(calls("two_level"), 32u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.dropped, 1u);
    EXPECT_EQ(ended.taken, ring_leads ? 1u : 0u);
    EXPECT_EQ(ended.not_taken, ring_leads ? 0u : 1u);
    const char* serving = ring_leads ? "ring" : "library";
    const uint64_t before = calls(serving);
    for (int round = 100; round < 106; ++round) allreduce_matches_library(comm, round, 11);
    const uint64_t after = calls(serving);
    EXPECT_EQ(after, before + 6);
    EXPECT_EQ(calls("two_level"), 32u);
    EXPECT_TRUE(same_on_every_rank(after, comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  for (topo::CollectivePoint& pt : prof.collectives) {
    const double library = pt.times.front().second.median;
    for (auto& [name, timing] : pt.times)
      if (name != "library" && name != "two_level") timing.median = library * 1.6;
  }
  ASSERT_EQ(load(file("no_fallback.json", topo::profile_text(prof))).info.status, ProfileStatus::loaded);
  EXPECT_EQ(choice().algorithm, two_level);
  EXPECT_EQ(choice().fallback, nullptr);
  set_trial("0");
}

// A thin lead of the library's on the count the profile timed (trials at
// their default): the library measured 1.3x ahead of every algorithm keeps
// the shape, and the job's own calls try the fastest of the others (the
// challenger the model names) against it: 16 calls of each side (8 blocks
// of four, half of 32), after which one that won every pair by 1.5x takes
// the shape, and one that lost them stops. Its calls made to look a second
// slower, the library serves the shape from then on; the library's made
// so, the challenger does; ahead on the slowest rank but behind on the
// ranks' mean, it is not taken. A 2x lead of the library's runs the library
// from the first call, untried. Every result is the library's, every rank
// alike.
TEST_F(ProfileLoading, AThinLeadOfTheLibrarysIsChallengedOnTheJobsCalls) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  alg::Choice c;
  ASSERT_NO_FATAL_FAILURE(load_thin_lead(&c));
  const topo::Hierarchy* world = topo::hierarchy(MPI_COMM_WORLD);
  EXPECT_EQ(c.algorithm, nullptr);
  ASSERT_NE(c.challenger, nullptr);
  EXPECT_TRUE(c.thin_lead);
  EXPECT_EQ(c.next_challenger, nullptr);
  const alg::Algorithm* challenger = c.challenger;
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  const std::string name(challenger->name);
  for (const bool library_leads : {true, false}) {
    SCOPED_TRACE(library_leads ? "the library leads" : name + " leads");
    MPI_Comm comm = first_rounds_with_slower(library_leads ? challenger : nullptr, 32);
    EXPECT_EQ(calls(name.c_str()), 16u);
    EXPECT_EQ(calls("library"), 16u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.taken, library_leads ? 0u : 1u);
    EXPECT_EQ(ended.not_taken, library_leads ? 1u : 0u);
    for (int round = 32; round < 38; ++round) allreduce_matches_library(comm, round, 11);
    const uint64_t after = calls(name.c_str());
    EXPECT_EQ(after, library_leads ? 16u : 22u);
    EXPECT_TRUE(same_on_every_rank(after, comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  // The challenger ahead on the slowest rank, behind on the ranks' mean:
  // the library's calls made 2 s slower on rank 0 alone, the challenger's
  // 1.5 s on every other rank (on 3 ranks or more, a longer sum). Not
  // taken, at half way or at the end: the library serves the shape.
  if (world_size() >= 3) {
    MPI_Comm comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    if (world_rank() == 0) alg::handicap_for_testing(nullptr, 2.0);
    else alg::handicap_for_testing(challenger, 1.5);
    for (int round = 0; round < 64; ++round) allreduce_matches_library(comm, round, 11);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(calls(name.c_str()), 32u);
    EXPECT_EQ(calls("library"), 32u);
    EXPECT_EQ(alg::trial_counts().not_taken, 1u);
    for (int round = 64; round < 70; ++round) allreduce_matches_library(comm, round, 11);
    EXPECT_EQ(calls(name.c_str()), 32u);
    PMPI_Comm_free(&comm);
  }
  // The library twice as fast: no challenger, the library from the first call.
  ASSERT_EQ(load(file("good.json", topo::profile_text(profile_where("library")))).info.status, ProfileStatus::loaded);
  EXPECT_EQ(choice_for_700_doubles(*world).challenger, nullptr);
  MPI_Comm comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  for (int round = 0; round < 40; ++round) allreduce_matches_library(comm, round, 11);
  EXPECT_EQ(calls("library"), 40u);
  const alg::TrialCounts none = alg::trial_counts();
  EXPECT_EQ(none.taken + none.not_taken + none.kept + none.dropped, 0u);
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// The library's profile above, with bcast timed at 1, 4 and 16 KiB:
// binomial 1.4x ahead of the library from a fixed root, between barriers
// and from a moving root (a thin lead, tried on the job's calls).
topo::Profile profile_where_binomial_leads_bcast_thinly() {
  topo::Profile prof = profile_where("library");
  for (int64_t bytes : {int64_t{1024}, int64_t{4096}, int64_t{16384}}) {
    const double library = 1e-5 * static_cast<double>(bytes) / 1024;
    topo::CollectivePoint pt = point_here("bcast", bytes, {});
    pt.times.emplace_back("library", topo::Timing{library, 0.02, 0, library, library});
    const double binomial = library / 1.4;
    pt.times.emplace_back("binomial", topo::Timing{binomial, 0.02, 0, binomial, binomial});
    prof.collectives.push_back(pt);
  }
  return prof;
}

// A broadcast whose ranks describe its data with different types, as MPI
// allows where the type signatures match: the root a column of a matrix
// (MPI_Type_vector, 700 ints two apart), the others 700 contiguous MPI_INT.
// Its decision and trial are made for its bytes (collectives.h
// agreed_call), so every rank tries binomial's thin lead alike: 32 calls a
// side, then whoever led serves the shape, on every rank. (Made for each
// rank's own type, the root, whose derived type was never tried, ran
// binomial while the others ran the trial's blocks and its barriers: the
// job hung.) Every rank receives the column. The agreed call is the same
// for a type of 1,000 doubles given once and for 1,000 MPI_DOUBLE: 8,000
// bytes, bucketed alike (not 8,000 bytes for one and 960 doubles for the
// other).
TEST_F(ProfileLoading, RanksThatDescribeABroadcastWithDifferentTypesTryItAlike) {
  const int p = world_size(), me = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("thin_bcast.json", topo::profile_text(profile_where_binomial_leads_bcast_thinly()))).info.status,
            ProfileStatus::loaded);
  MPI_Datatype thousand = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_contiguous(1000, MPI_DOUBLE, &thousand), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&thousand), MPI_SUCCESS);
  const alg::Call as_one{.collective = alg::Collective::bcast, .count = 1, .type = thousand};
  const alg::Call as_doubles{.collective = alg::Collective::bcast, .count = 1000, .type = MPI_DOUBLE};
  ASSERT_TRUE(alg::counts_bucketed(alg::Collective::bcast));
  EXPECT_EQ(alg::agreed_call(as_one).type, MPI_BYTE);
  EXPECT_EQ(alg::agreed_call(as_one).count, alg::decision_count(8000));
  EXPECT_EQ(alg::agreed_call(as_doubles).count, alg::agreed_call(as_one).count);
  EXPECT_EQ(alg::agreed_call(as_doubles, false).count, 8000);
  MPI_Type_free(&thousand);

  constexpr int kColumn = 700;
  MPI_Datatype column = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_vector(kColumn, 1, 2, MPI_INT, &column), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&column), MPI_SUCCESS);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::bcast, algorithm); };
  const alg::Algorithm* binomial = alg::find_algorithm(alg::Collective::bcast, "binomial");
  ASSERT_NE(binomial, nullptr);
  for (const bool library_leads : {true, false}) {
    SCOPED_TRACE(library_leads ? "the library leads" : "binomial leads");
    MPI_Comm comm = seen_duplicate();
    std::vector<int> matrix(size_t{2} * kColumn), received(kColumn);
    auto bcast = [&](int round) {
      if (me == 0) {
        for (int i = 0; i < 2 * kColumn; ++i) matrix[static_cast<size_t>(i)] = i % 2 ? -1 : i * 7 + round;
        ASSERT_EQ(MPI_Bcast(matrix.data(), 1, column, 0, comm), MPI_SUCCESS);
        for (int i = 0; i < 2 * kColumn; ++i)
          ASSERT_EQ(matrix[static_cast<size_t>(i)], i % 2 ? -1 : i * 7 + round) << "the root's data changed";
      } else {
        std::fill(received.begin(), received.end(), -2);
        ASSERT_EQ(MPI_Bcast(received.data(), kColumn, MPI_INT, 0, comm), MPI_SUCCESS);
        for (int i = 0; i < kColumn; ++i) ASSERT_EQ(received[static_cast<size_t>(i)], 2 * i * 7 + round) << round;
      }
    };
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(library_leads ? binomial : nullptr, 1.0);
    for (int round = 0; round < 64; ++round) bcast(round);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(calls("binomial"), 32u);
    EXPECT_EQ(calls("library"), 32u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.dropped, library_leads ? 1u : 0u);
    EXPECT_EQ(ended.kept, library_leads ? 0u : 1u);
    for (int round = 64; round < 70; ++round) bcast(round);
    const uint64_t after = calls("binomial");
    EXPECT_EQ(after, library_leads ? 32u : 38u);
    EXPECT_TRUE(same_on_every_rank(after, comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  MPI_Type_free(&column);
  set_trial("0");
}

// A lead half way that rests on a few slow blocks of the opponent's does
// not take the shape there (trial.cpp, stop_early): on the thin lead's
// trial above, the challenger's calls made to look 1 s a call and the
// library's 1.06 s, but 10 s in two of the library's first four blocks
// (calls 0-3 and 12-15: blocks run library, challenger, challenger,
// library, ...). Half way the challenger has won every pair, by 5x on the
// medians, but by less than 1.10x on the library's fastest block: the
// trial runs on to its end (32 calls of each side), where the median
// lead of 1.06x does not take the shape, and the library serves it from
// then on. Every result is the library's, every rank alike.
TEST_F(ProfileLoading, AHalfWayLeadOnTheOpponentsSlowBlocksDoesNotTakeTheShape) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  thin_lead_challenger_not_taken([](int round) {
    const int block = round / 4;
    return block == 0 || block == 3 ? 10.0 : 1.06;
  });
}

// A thin lead of the library's on the count the profile timed (trials at
// their default), over two algorithms: the library measured 1.3x ahead of
// every other. The fastest of them is tried against it as a challenger (16
// calls of each side), and where it is not taken (its calls made to look
// 2 s slower, the library's 1 s), the next fastest, also within 1.5x of
// the library, is tried the same way (Choice::next_challenger): with its
// calls as they ran, it leads and serves the shape from then on; made 2 s
// slower too, it is not taken and the library serves it. Every result is
// the library's, every rank alike.
TEST_F(ProfileLoading, TheNextFastestIsTriedWhereAThinLeadsChallengerIsNotTaken) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("thin_two.json", topo::profile_text(profile_where("library", 0, 1.3)))).info.status,
            ProfileStatus::loaded);
  const topo::Hierarchy* world = topo::hierarchy(MPI_COMM_WORLD);
  ASSERT_NE(world, nullptr);
  const alg::Choice c = choice_for_700_doubles(*world);
  EXPECT_EQ(c.algorithm, nullptr);
  EXPECT_TRUE(c.thin_lead);
  ASSERT_NE(c.challenger, nullptr);
  ASSERT_NE(c.next_challenger, nullptr);
  EXPECT_NE(c.next_challenger, c.challenger);
  EXPECT_FALSE(c.next_against_first);
  const std::string first(c.challenger->name), next(c.next_challenger->name);
  auto calls = [](const std::string& algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (const bool next_leads : {true, false}) {
    SCOPED_TRACE(next_leads ? next + " leads the library" : "the library leads " + next);
    MPI_Comm comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(c.challenger, 2.0);
    alg::handicap_for_testing(nullptr, 1.0);
    if (!next_leads) alg::handicap_for_testing(c.next_challenger, 2.0);
    for (int round = 0; round < 64; ++round) allreduce_matches_library(comm, round, 11);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(calls(first), 16u);
    EXPECT_EQ(calls(next), 16u);
    EXPECT_EQ(calls("library"), 32u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.taken, next_leads ? 1u : 0u);
    EXPECT_EQ(ended.not_taken, next_leads ? 1u : 2u);
    const std::string serving = next_leads ? next : "library";
    const uint64_t before = calls(serving);
    for (int round = 64; round < 70; ++round) allreduce_matches_library(comm, round, 11);
    EXPECT_EQ(calls(serving), before + 6);
    EXPECT_EQ(calls(first), 16u);
    EXPECT_TRUE(same_on_every_rank(calls(serving), comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  set_trial("0");
}

// A challenger ahead on the slowest rank only because ranks' calls of the
// opponent are slow in stretches does not take the shape (trial.cpp,
// not_behind_on_the_mean): on the thin lead's trial above, the
// challenger's calls made to look 1 s a call on every rank, the library's
// 0.8 s, but 10 s on the last rank in five of the library's eight blocks
// (the first, second, fourth, fifth and seventh) and on the rank before it
// in two others (the third and sixth). The challenger wins seven of eight
// pairs on the slowest rank, every one of the first four, by 10x, and the
// blocks summed over the ranks have it ahead in seven; on each rank's
// lower quartile the library is 1.25x ahead, half way as at the end. The
// trial runs to its end (no take half way), the challenger is not taken,
// and the library serves the shape from then on. Every result is the
// library's, every rank alike.
TEST_F(ProfileLoading, AChallengerAheadOnOneSlowRankOnlyDoesNotTakeTheShape) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  // Blocks of four calls run library, challenger, challenger, library, ...:
  // the library's eight blocks are calls 0-3, 12-19, 28-35, 44-51 and 60-63.
  const std::set<int> last_stalls = {0, 3, 7, 8, 12}, before_last_stalls = {4, 11};  // in blocks of four calls
  const std::set<int> stalls = world_rank() == world_size() - 1   ? last_stalls
                               : world_rank() == world_size() - 2 ? before_last_stalls
                                                                  : std::set<int>{};
  thin_lead_challenger_not_taken([&](int round) { return stalls.count(round / 4) ? 10.0 : 0.8; });
}

// The model's choice thinly ahead of the next fastest on the count the
// profile timed (trials at their default): two_level measured twice as fast
// as the library, ring 1.25x slower than two_level. two_level is chosen
// and not tried against the library (its lead is not thin); ring is tried
// against it (Choice::runner_up), 16 calls of each side as a challenger to
// the library is. Its calls made to look a second slower, two_level serves
// the shape from then on; two_level's made so, ring does. Every result is
// the library's, every rank alike. Where ring is 1.6x slower, it is not
// tried, and two_level runs from the first call.
TEST_F(ProfileLoading, TheRunnerUpToAThinLeadOverItIsTriedAgainstTheChoice) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  auto profile = [](double ring_behind) {
    return with_times_scaled(profile_where("two_level"), "ring", ring_behind / 2);
  };
  ASSERT_EQ(load(file("runner_up.json", topo::profile_text(profile(1.25)))).info.status, ProfileStatus::loaded);
  const topo::Hierarchy* world = topo::hierarchy(MPI_COMM_WORLD);
  ASSERT_NE(world, nullptr);
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  const alg::Algorithm* ring = alg::find_algorithm(alg::Collective::allreduce, "ring");
  ASSERT_NE(two_level, nullptr);
  ASSERT_NE(ring, nullptr);
  auto choice = [&] { return choice_for_700_doubles(*world); };
  const alg::Choice c = choice();
  EXPECT_EQ(c.algorithm, two_level);
  EXPECT_FALSE(c.thin_lead);
  EXPECT_EQ(c.runner_up, ring);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (const bool choice_leads : {true, false}) {
    SCOPED_TRACE(choice_leads ? "two_level leads" : "ring leads");
    MPI_Comm comm = first_rounds_with_slower(choice_leads ? ring : two_level, 32);
    EXPECT_EQ(calls("ring"), 16u);
    EXPECT_EQ(calls("two_level"), 16u);
    EXPECT_EQ(calls("library"), 0u);
    const alg::TrialCounts ended = alg::trial_counts();
    EXPECT_EQ(ended.taken, choice_leads ? 0u : 1u);
    EXPECT_EQ(ended.not_taken, choice_leads ? 1u : 0u);
    for (int round = 32; round < 38; ++round) allreduce_matches_library(comm, round, 11);
    const uint64_t after = calls(choice_leads ? "two_level" : "ring");
    EXPECT_EQ(after, 22u);
    EXPECT_TRUE(same_on_every_rank(after, comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  // Not where the root moved: binomial twice as fast as the library from
  // a rotating root, two_level 1.25x behind binomial, is chosen untried
  // there; from a fixed root, two_level is tried against it.
  topo::Profile rooted = profile(1.25);
  topo::CollectivePoint pt = point_here("bcast", 4096, {});
  pt.times.emplace_back("library", topo::Timing{8e-6, 0.02, 0, 0, 8e-6});
  pt.times.emplace_back("binomial", topo::Timing{4e-6, 0.02, 0, 0, 4e-6});
  pt.times.emplace_back("two_level", topo::Timing{5e-6, 0.02, 0, 0, 5e-6});
  rooted.collectives.push_back(pt);
  ASSERT_EQ(load(file("runner_up_rooted.json", topo::profile_text(rooted))).info.status, ProfileStatus::loaded);
  alg::Shape bcast = alg::shape_of(alg::Collective::bcast, 4096, *world);
  const alg::Choice fixed = alg::choose(bcast, alg::Tuning::from_env(), alg::cost_model());
  EXPECT_EQ(fixed.algorithm, alg::find_algorithm(alg::Collective::bcast, "binomial"));
  EXPECT_EQ(fixed.runner_up, alg::find_algorithm(alg::Collective::bcast, "two_level"));
  bcast.moving_root = true;
  const alg::Choice moved = alg::choose(bcast, alg::Tuning::from_env(), alg::cost_model());
  EXPECT_EQ(moved.algorithm, fixed.algorithm);
  EXPECT_EQ(moved.runner_up, nullptr);

  ASSERT_EQ(load(file("runner_up_far.json", topo::profile_text(profile(1.6)))).info.status, ProfileStatus::loaded);
  EXPECT_EQ(choice().runner_up, nullptr);
  MPI_Comm comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  for (int round = 0; round < 20; ++round) allreduce_matches_library(comm, round, 11);
  EXPECT_EQ(calls("two_level"), 20u);
  const alg::TrialCounts none = alg::trial_counts();
  EXPECT_EQ(none.taken + none.not_taken + none.kept + none.dropped, 0u);
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// Two counts timed, neither this job's: two_level led on the nearer (one
// rank more), ring on the farther (two more), so no algorithm led on both.
// The job's calls try two_level first against the library, then ring,
// against the library where two_level was not taken and against two_level
// where it was (the formulas give ring the shorter time:
// Choice::next_against_first). The sides' calls are made to look slower
// by a fixed handicap each (none: the fastest), so that every verdict is
// known, and plain at half way: each trial ends after 16 calls of each
// side (of 32), taken where the challenger won every pair, not where it
// lost them. Rank 0 forgets its decisions now and then (as a table that
// evicted them would) and decides again from the first challenger: every
// rank still runs the same side of every call. Every result is the
// library's.
class ChallengerChain : public ProfileLoading {
 protected:
  void SetUp() override {
    ProfileLoading::SetUp();
    set_trial(nullptr);
    topo::Profile two_counts = profile_where("two_level", 1);
    for (const topo::CollectivePoint& pt : profile_where("ring", 2).collectives) two_counts.collectives.push_back(pt);
    ASSERT_EQ(load(file("two_counts.json", topo::profile_text(two_counts))).info.status, ProfileStatus::loaded);
    ASSERT_EQ(PMPI_Comm_dup(MPI_COMM_WORLD, &comm_), MPI_SUCCESS);
    // 16 KiB calls: the formulas give ring a time more than 10% shorter than
    // two_level's on 2-4 ranks, so ring is tried against two_level where
    // two_level is taken (Choice::next_against_first).
    const topo::Hierarchy* h = topo::hierarchy(comm_);
    ASSERT_NE(h, nullptr);
    const alg::Choice c =
        alg::choose(alg::shape_of(alg::Collective::allreduce, kBytes, *h), alg::Tuning::from_env(), alg::cost_model());
    ASSERT_NE(c.challenger, nullptr);
    ASSERT_NE(c.next_challenger, nullptr);
    ASSERT_EQ(c.challenger->name, "two_level");
    ASSERT_EQ(c.next_challenger->name, "ring");
    ASSERT_TRUE(c.next_against_first);
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
  }
  void TearDown() override {
    alg::no_handicaps_for_testing();
    if (comm_ != MPI_COMM_NULL) PMPI_Comm_free(&comm_);
    set_trial("0");
    ProfileLoading::TearDown();
  }
  // Calls [from, to), each side's trial calls `library`, `two_level` and
  // `ring` seconds slower.
  void run(int from, int to, double library, double two_level, double ring) {
    alg::no_handicaps_for_testing();
    alg::handicap_for_testing(nullptr, library);
    alg::handicap_for_testing(alg::find_algorithm(alg::Collective::allreduce, "two_level"), two_level);
    alg::handicap_for_testing(alg::find_algorithm(alg::Collective::allreduce, "ring"), ring);
    std::vector<double> in(kCount), out(kCount), ref(kCount);
    for (int round = from; round < to; ++round) {
      if ((round == 40 || round == 64) && world_rank() == 0) alg::forget_decisions();
      for (size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<double>((i + static_cast<size_t>(round)) % 7 + static_cast<size_t>(world_rank()));
      ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), kCount, MPI_DOUBLE, MPI_SUM, comm_), MPI_SUCCESS);
      PMPI_Allreduce(in.data(), ref.data(), kCount, MPI_DOUBLE, MPI_SUM, comm_);
      ASSERT_EQ(out, ref) << "round " << round;
    }
  }
  static constexpr int kCount = 2048;  // doubles
  static constexpr int64_t kBytes = int64_t{kCount} * 8;
  static uint64_t calls(const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); }
  bool same_everywhere(uint64_t mine) const { return same_on_every_rank(mine, comm_); }
  MPI_Comm comm_ = MPI_COMM_NULL;
};

TEST_F(ChallengerChain, WhereTheFirstIsNotTakenTheNextIsTriedAgainstTheLibrary) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  run(0, 32, 1.0, 2.0, 0);
  EXPECT_EQ(calls("two_level"), 16u);
  EXPECT_EQ(calls("library"), 16u);
  EXPECT_EQ(calls("ring"), 0u);
  EXPECT_EQ(alg::trial_counts().not_taken, 1u);
  run(32, 70, 1.0, 2.0, 0);
  EXPECT_EQ(calls("library"), 32u);
  EXPECT_EQ(calls("two_level"), 16u);
  EXPECT_EQ(calls("ring"), 22u);
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  run(70, 76, 0, 0, 0);
  EXPECT_EQ(calls("ring"), 28u);
  EXPECT_TRUE(same_everywhere(calls("ring"))) << "every rank runs the same side";
}

TEST_F(ChallengerChain, AChallengerTakenIsTheNextOnesOpponentAndStaysWhereItLeads) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  run(0, 32, 3.0, 0, 1.0);
  EXPECT_EQ(calls("two_level"), 16u);
  EXPECT_EQ(calls("library"), 16u);
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  run(32, 70, 3.0, 0, 1.0);
  EXPECT_EQ(calls("ring"), 16u);
  EXPECT_EQ(calls("two_level"), 38u);
  EXPECT_EQ(calls("library"), 16u);
  EXPECT_EQ(alg::trial_counts().not_taken, 1u);
  run(70, 76, 0, 0, 0);
  EXPECT_EQ(calls("two_level"), 44u);
  EXPECT_EQ(calls("ring"), 16u);
  EXPECT_TRUE(same_everywhere(calls("two_level"))) << "every rank runs the same side";
}

TEST_F(ChallengerChain, AChallengerThatLeadsTheOneTakenTakesTheShape) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  run(0, 64, 2.0, 1.0, 0);
  EXPECT_EQ(calls("two_level"), 32u);
  EXPECT_EQ(calls("library"), 16u);
  EXPECT_EQ(calls("ring"), 16u);
  EXPECT_EQ(alg::trial_counts().taken, 2u);
  run(64, 70, 0, 0, 0);
  EXPECT_EQ(calls("ring"), 22u);
  EXPECT_EQ(calls("two_level"), 32u);
  EXPECT_TRUE(same_everywhere(calls("ring"))) << "every rank runs the same side";
}

// Calls above 64 KiB (256 KiB here) on a rank count the profile did not
// time: an untimed block of two calls of each side, then blocks of three
// calls (the first two untimed), two of each side. A challenger that lost
// the first timed pair (its calls made to look a second slower) cannot win
// both, so its trial ends there, after five calls of each side, and the
// library serves the shape. One that won the first pair (the library's
// calls made to look slower) runs its second block and takes the shape
// after eight calls of each side. One that won both pairs by less than 1.5x but more than 10%
// runs two pairs more and is judged on four; one that won them by less
// than 10% does not. Every result is the library's, every rank alike.
TEST_F(ProfileLoading, ALargeCallsChallengerThatCannotWinStopsEarly) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  // The profile above, with 256 KiB timed the same way (two_level twice as fast).
  ASSERT_EQ(
      load(file("other_count_large.json", topo::profile_text(profile_with_256k_where("two_level", 1)))).info.status,
      ProfileStatus::loaded);
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  ASSERT_NE(two_level, nullptr);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  // Calls of every algorithm but the library and two_level: the next
  // challenger's, which above 64 KiB a call the runner-up of the nearest
  // count timed makes (select.cpp, leaders_on_timed_counts).
  auto others = [&] {
    uint64_t n = 0;
    for (const alg::Algorithm* a : alg::algorithms_for(alg::Collective::allreduce))
      if (a->name != "two_level") n += calls(std::string(a->name).c_str());
    return n;
  };
  auto allreduce = [](MPI_Comm comm, int round) { large_allreduce_matches_library(comm, round); };
  auto same_everywhere = [](uint64_t mine, MPI_Comm comm) {
    uint64_t lowest = 0, highest = 0;
    PMPI_Allreduce(&mine, &lowest, 1, MPI_UINT64_T, MPI_MIN, comm);
    PMPI_Allreduce(&mine, &highest, 1, MPI_UINT64_T, MPI_MAX, comm);
    return lowest == highest;
  };

  // The first `calls` calls on a communicator of their own (its own trials),
  // the side `slower` (null: the library) made to look a second slower a call.
  MPI_Comm comm = MPI_COMM_NULL;
  auto first_calls = [&](const alg::Algorithm* slower, int calls) {
    comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::handicap_for_testing(slower, 1.0);
    for (int round = 0; round < calls; ++round) allreduce(comm, round);
    alg::no_handicaps_for_testing();
  };

  // Slower: the warm-up and one timed block of each side, then the library.
  first_calls(two_level, 10);
  EXPECT_EQ(calls("library"), 5u);
  EXPECT_EQ(calls("two_level"), 5u);
  EXPECT_EQ(alg::trial_counts().not_taken, 1u);
  EXPECT_EQ(alg::trial_counts().taken, 0u);
  // Then the next challenger's trial against the library: the library's
  // two untimed calls, its own two, and the library's first timed block.
  for (int round = 10; round < 16; ++round) allreduce(comm, round);
  EXPECT_EQ(calls("two_level"), 5u);
  EXPECT_EQ(calls("library"), 9u);
  EXPECT_EQ(others(), 2u);
  EXPECT_TRUE(same_everywhere(calls("two_level"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);

  // Faster: eight calls of each side, then two_level.
  first_calls(nullptr, 16);
  EXPECT_EQ(calls("library"), 8u);
  EXPECT_EQ(calls("two_level"), 8u);
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  // Then the next challenger's, against two_level (its untimed calls first).
  for (int round = 16; round < 22; ++round) allreduce(comm, round);
  EXPECT_EQ(calls("two_level"), 12u);
  EXPECT_EQ(others(), 2u);
  EXPECT_TRUE(same_everywhere(calls("two_level"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);

  // Each side's calls made to look `library` and `mine` seconds a call.
  auto handicapped_calls = [&](double library, double mine, int calls) {
    comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::handicap_for_testing(nullptr, library);
    alg::handicap_for_testing(two_level, mine);
    for (int round = 0; round < calls; ++round) allreduce(comm, round);
    alg::no_handicaps_for_testing();
  };
  // Faster by 1.25x, too little to take the shape on two pairs: two more
  // pairs (fourteen calls of each side), then two_level.
  handicapped_calls(1.25, 1.0, 28);
  EXPECT_EQ(calls("library"), 14u);
  EXPECT_EQ(calls("two_level"), 14u);
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  for (int round = 28; round < 32; ++round) allreduce(comm, round);
  EXPECT_EQ(calls("two_level"), 16u);
  EXPECT_EQ(others(), 2u);
  EXPECT_TRUE(same_everywhere(calls("two_level"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);

  // The warm-up blocks are not timed: two_level's made to look a second
  // slower a call, and the library's timed calls half a second, two_level
  // takes the shape on its two timed pairs.
  comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  for (int round = 0; round < 16; ++round) {
    if (round == 0) alg::handicap_for_testing(two_level, 1.0);
    if (round == 4) {
      alg::handicap_for_testing(two_level, 0);
      alg::handicap_for_testing(nullptr, 0.5);
    }
    allreduce(comm, round);
  }
  alg::no_handicaps_for_testing();
  EXPECT_EQ(calls("library"), 8u);
  EXPECT_EQ(calls("two_level"), 8u);
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  PMPI_Comm_free(&comm);

  // Ahead of the library's median by 5.8x, but on one slow block of the
  // library's: its timed calls made to look 10 s in its first block
  // (calls 4-6: blocks run library, two_level, two_level, library after the
  // warm-up) and 1 s in its second, two_level's 0.95 s. Its median leads
  // the library's fastest block by less than 1.10x: not taken.
  comm = seen_duplicate();
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  alg::handicap_for_testing(two_level, 0.95);
  for (int round = 0; round < 16; ++round) {
    alg::handicap_for_testing(nullptr, round >= 4 && round <= 6 ? 10.0 : 1.0);
    allreduce(comm, round);
  }
  alg::no_handicaps_for_testing();
  EXPECT_EQ(calls("library"), 8u);
  EXPECT_EQ(calls("two_level"), 8u);
  EXPECT_EQ(alg::trial_counts().not_taken, 1u);
  EXPECT_EQ(alg::trial_counts().taken, 0u);
  for (int round = 16; round < 18; ++round) allreduce(comm, round);
  EXPECT_EQ(calls("library"), 10u);
  EXPECT_TRUE(same_everywhere(calls("library"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);

  // Faster by 1.05x, within the margin: no more pairs, the library.
  handicapped_calls(1.05, 1.0, 16);
  EXPECT_EQ(calls("library"), 8u);
  EXPECT_EQ(calls("two_level"), 8u);
  EXPECT_EQ(alg::trial_counts().not_taken, 1u);
  for (int round = 16; round < 18; ++round) allreduce(comm, round);
  EXPECT_EQ(calls("library"), 10u);
  EXPECT_TRUE(same_everywhere(calls("library"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// The model's choice of calls above 64 KiB (256 KiB here, on the count the
// profile timed: two_level twice as fast as the library, a lead not thin)
// is tried whatever its lead, with VENEER_TRIAL unset as with 32
// (trial.h, kFullTrialBytes), on four timed pairs against the library,
// not two (trial.cpp, blocks_for): an untimed block of two calls of each
// side, then four blocks of three calls of each (the first two of a block
// untimed), fourteen calls a side. The
// library's calls made to look a second slower, two_level serves the shape
// from then on; two_level's made so, the library does. Calls of 5,600 B,
// where the profile puts two_level as far ahead, are not tried unless
// VENEER_TRIAL asks: two_level runs them from the first. Every result is
// the library's, every rank alike.
TEST_F(ProfileLoading, ALargeCallsModelChoiceIsTriedOnFourPairs) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  ASSERT_NE(two_level, nullptr);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (const char* trial : {"32", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(trial ? "VENEER_TRIAL=32" : "VENEER_TRIAL unset");
    set_trial(trial);
    ASSERT_EQ(load(file("large_model.json", topo::profile_text(profile_with_256k_where("two_level", 0)))).info.status,
              ProfileStatus::loaded);
    for (const bool library_slower : {true, false}) {
      SCOPED_TRACE(library_slower ? "the library slower" : "two_level slower");
      MPI_Comm comm = seen_duplicate();
      alg::reset_collectives_counts();
      alg::reset_trial_counts();
      alg::handicap_for_testing(library_slower ? nullptr : two_level, 1.0);
      for (int round = 0; round < 28; ++round) large_allreduce_matches_library(comm, round);
      alg::no_handicaps_for_testing();
      EXPECT_EQ(calls("library"), 14u);
      EXPECT_EQ(calls("two_level"), 14u);
      EXPECT_EQ(alg::trial_counts().kept, library_slower ? 1u : 0u);
      EXPECT_EQ(alg::trial_counts().dropped, library_slower ? 0u : 1u);
      for (int round = 28; round < 32; ++round) large_allreduce_matches_library(comm, round);
      const uint64_t after = calls("two_level");
      EXPECT_EQ(after, library_slower ? 18u : 14u);
      EXPECT_TRUE(same_on_every_rank(after, comm)) << "every rank runs the same side";
      PMPI_Comm_free(&comm);
    }
    if (!trial) {
      MPI_Comm comm = seen_duplicate();
      alg::reset_collectives_counts();
      alg::reset_trial_counts();
      for (int round = 0; round < 4; ++round) allreduce_matches_library(comm, round, 11);
      EXPECT_EQ(calls("two_level"), 4u);
      EXPECT_EQ(calls("library"), 0u);
      EXPECT_EQ(alg::trial_counts().kept + alg::trial_counts().dropped, 0u);
      PMPI_Comm_free(&comm);
    }
  }
  set_trial("0");
}

// The runner-up to a large call's choice (256 KiB here: two_level twice as
// fast as the library in the profile, ring 1.6x, within 1.5x of two_level;
// VENEER_TRIAL unset) is tried after that choice's trial against the
// library (decisions.h, Remembered::settle): against two_level where two_level
// is kept, against the library where it is returned. Sides are made to
// look a second slower a call to decide each trial: the library, then
// two_level (ring takes the shape from it); two_level, then ring (the
// library keeps it). Every result is the library's, every rank alike.
TEST_F(ProfileLoading, ALargeCallsRunnerUpIsTriedAfterItsChoice) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  const topo::Profile profile = with_times_scaled(profile_with_256k_where("two_level", 0), "ring", 0.625);
  ASSERT_EQ(load(file("runner_up.json", topo::profile_text(profile))).info.status, ProfileStatus::loaded);
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  const alg::Algorithm* ring = alg::find_algorithm(alg::Collective::allreduce, "ring");
  ASSERT_NE(two_level, nullptr);
  ASSERT_NE(ring, nullptr);
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  for (const bool kept : {true, false}) {
    SCOPED_TRACE(kept ? "two_level kept" : "two_level returned");
    MPI_Comm comm = seen_duplicate();
    alg::reset_collectives_counts();
    alg::reset_trial_counts();
    alg::handicap_for_testing(kept ? nullptr : two_level, 1.0);
    int round = 0;
    while (trials_ended() < 1 && round < 40) large_allreduce_matches_library(comm, round++);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(alg::trial_counts().kept, kept ? 1u : 0u);
    EXPECT_EQ(alg::trial_counts().dropped, kept ? 0u : 1u);
    EXPECT_EQ(calls("ring"), 0u) << "the runner-up waits for the choice's trial";
    alg::handicap_for_testing(kept ? two_level : ring, 1.0);
    while (trials_ended() < 2 && round < 80) large_allreduce_matches_library(comm, round++);
    alg::no_handicaps_for_testing();
    EXPECT_EQ(alg::trial_counts().taken, kept ? 1u : 0u);
    EXPECT_EQ(alg::trial_counts().not_taken, kept ? 0u : 1u);
    EXPECT_GT(calls("ring"), 0u) << "the runner-up was tried";
    const uint64_t ring_before = calls("ring"), library_before = calls("library");
    for (int k = 0; k < 4; ++k) large_allreduce_matches_library(comm, round++);
    EXPECT_EQ(calls("ring") - ring_before, kept ? 4u : 0u);
    EXPECT_EQ(calls("library") - library_before, kept ? 0u : 4u);
    EXPECT_TRUE(same_on_every_rank(calls("ring"), comm)) << "every rank runs the same side";
    PMPI_Comm_free(&comm);
  }
  set_trial("0");
}

// What won beside a shape on the job's own calls is tried there first
// (trial.h, neighbours_winner). On a count the profile did not time, where
// the model keeps the library and names two_level its challenger, ring,
// having taken calls of 5,600 bytes from the library on this communicator,
// is tried first on calls of 16,000 bytes (within 8x): its block follows
// the library's first, and two_level is not tried while ring takes the
// shape. A shape more than 8x away, or another pattern, gets no winner;
// the answer for a shape is its first. Every result is the library's,
// every rank alike.
TEST_F(ProfileLoading, WhatWonBesideAShapeIsTriedFirst) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("other_count.json", topo::profile_text(profile_where("two_level", 1)))).info.status,
            ProfileStatus::loaded);
  const alg::Algorithm* ring = alg::find_algorithm(alg::Collective::allreduce, "ring");
  ASSERT_NE(ring, nullptr);
  MPI_Comm comm = seen_duplicate();
  const topo::Hierarchy* h = topo::hierarchy(comm);
  ASSERT_NE(h, nullptr);
  auto call_of = [](const std::vector<double>& in, std::vector<double>& out) {
    return alg::Call{.collective = alg::Collective::allreduce,
                     .sbuf = in.data(),
                     .rbuf = out.data(),
                     .count = static_cast<int>(in.size()),
                     .type = MPI_DOUBLE,
                     .op = MPI_SUM};
  };
  // ring against the library on 700 doubles, the library's calls made to
  // look a second slower: ring takes the shape.
  std::vector<double> in(700, 1.0 + world_rank()), out(700), ref(700);
  PMPI_Allreduce(in.data(), ref.data(), 700, MPI_DOUBLE, MPI_SUM, comm);
  alg::reset_trial_counts();
  alg::handicap_for_testing(nullptr, 1.0);
  alg::Verdict v = alg::Verdict::trying;
  for (int k = 0; k < 256 && v == alg::Verdict::trying; ++k) {
    std::optional<int> ran;
    v = alg::trial_run(*ring, call_of(in, out), *h, 0, alg::TrialRole::challenger, nullptr, &ran);
    if (ran) {
      ASSERT_EQ(*ran, MPI_SUCCESS);
      ASSERT_EQ(out, ref) << "call " << k;
    }
  }
  ASSERT_EQ(v, alg::Verdict::keep);

  // 2,000 doubles through the entry point: the library's block, then ring's.
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  auto calls = [](const char* algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  std::vector<double> big(2000), sum(2000), expected(2000);
  auto allreduce = [&](int round) {
    for (size_t i = 0; i < big.size(); ++i)
      big[i] = static_cast<double>((i + static_cast<size_t>(round)) % 7 + static_cast<size_t>(world_rank()));
    ASSERT_EQ(MPI_Allreduce(big.data(), sum.data(), 2000, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
    PMPI_Allreduce(big.data(), expected.data(), 2000, MPI_DOUBLE, MPI_SUM, comm);
    ASSERT_EQ(sum, expected) << "round " << round;
  };
  for (int round = 0; round < 8; ++round) allreduce(round);
  EXPECT_EQ(calls("library"), 4u);
  EXPECT_EQ(calls("ring"), 4u);
  EXPECT_EQ(calls("two_level"), 0u);
  for (int round = 8; round < 64; ++round) allreduce(round);
  alg::no_handicaps_for_testing();
  EXPECT_EQ(alg::trial_counts().taken, 1u);
  EXPECT_EQ(calls("two_level"), 0u) << "the model's challenger waits behind the one that won beside it";
  const uint64_t served = calls("ring");
  for (int round = 64; round < 70; ++round) allreduce(round);
  EXPECT_EQ(calls("ring"), served + 6);
  EXPECT_TRUE(same_on_every_rank(calls("ring"), comm)) << "every rank runs the same side";

  // 1 MiB is more than 8x from either; the first-since-a-barrier pattern had no trials.
  std::vector<double> far(1 << 17), far_out(1 << 17);
  EXPECT_EQ(alg::neighbours_winner(call_of(far, far_out), *h, 0), nullptr);
  EXPECT_EQ(alg::neighbours_winner(call_of(big, sum), *h, 2), nullptr);
  // 2,000 doubles keeps its first answer; 4,000 (nearest: 2,000, which ring took) gets ring.
  EXPECT_EQ(alg::neighbours_winner(call_of(big, sum), *h, 0), ring);
  std::vector<double> four(4000), four_out(4000);
  EXPECT_EQ(alg::neighbours_winner(call_of(four, four_out), *h, 0), ring);
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// An allreduce of `n` doubles on comm through Veneer (values varying with
// `round`), checked against the library's; `barrier`: an MPI_Barrier on comm
// before it (the call is the first since a barrier).
void allreduce_of_matches_library(MPI_Comm comm, int n, int round, bool barrier = false) {
  std::vector<double> in(static_cast<size_t>(n)), out(in.size()), ref(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<double>((i + static_cast<size_t>(round)) % 9 + static_cast<size_t>(world_rank()));
  if (barrier) ASSERT_EQ(MPI_Barrier(comm), MPI_SUCCESS);
  ASSERT_EQ(MPI_Allreduce(in.data(), out.data(), n, MPI_DOUBLE, MPI_SUM, comm), MPI_SUCCESS);
  PMPI_Allreduce(in.data(), ref.data(), n, MPI_DOUBLE, MPI_SUM, comm);
  ASSERT_EQ(out, ref) << n << " doubles, round " << round;
}

// A challenger that lost to the library beside a shape (a size 2x away,
// the same pattern) is not tried on it (trial.cpp lost_beside): on a rank
// count the profile did not time, two_level, the challenger at 350, 700
// and 1,400 doubles, made to look a second slower a call, loses at 350;
// at 700 its trial is spared and the library serves from the first call;
// at 1,400 (4x from the loss; a spared trial is no evidence) it is tried
// again. Every result is the library's.
TEST_F(ProfileLoading, AChallengerThatLostBesideAShapeIsNotTriedThere) {
  if (world_size() < 2) GTEST_SKIP() << "one rank passes through";
  set_trial(nullptr);
  ASSERT_EQ(load(file("other_count.json", topo::profile_text(profile_where("two_level", 1)))).info.status,
            ProfileStatus::loaded);
  MPI_Comm comm = seen_duplicate();
  const topo::Hierarchy* h = topo::hierarchy(comm);
  ASSERT_NE(h, nullptr);
  const alg::Algorithm* two_level = alg::find_algorithm(alg::Collective::allreduce, "two_level");
  ASSERT_NE(two_level, nullptr);
  for (const int n : {350, 700, 1400}) {
    SCOPED_TRACE(n);
    const alg::Choice choice = alg::choose(alg::shape_of(alg::Collective::allreduce, int64_t{n} * 8, *h),
                                           alg::Tuning::from_env(), alg::cost_model());
    ASSERT_EQ(choice.algorithm, nullptr) << n;
    ASSERT_EQ(choice.challenger, two_level) << n;
  }
  auto calls = [](std::string_view algorithm) { return calls_of(alg::Collective::allreduce, algorithm); };
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  alg::handicap_for_testing(two_level, 1.0);
  // Every challenger after it (the third, the formulas' best) loses too.
  for (const alg::Algorithm* a : alg::algorithms_for(alg::Collective::allreduce))
    if (a != two_level) alg::handicap_for_testing(a, 1.0);
  int round = 0;
  while (trials_ended() == 0 && round < 200) allreduce_of_matches_library(comm, 350, round++);
  ASSERT_GE(trials_ended(), 1u);
  for (int k = 0; k < 100; ++k) allreduce_of_matches_library(comm, 350, round++);  // any after it end too
  const alg::TrialCounts at_350 = alg::trial_counts();
  EXPECT_EQ(at_350.taken + at_350.kept, 0u);
  EXPECT_EQ(at_350.spared, 0u);
  const uint64_t tried = calls("two_level");
  EXPECT_GT(tried, 0u);
  EXPECT_GT(at_350.barriers, 0u) << "back to back, each block starts from a barrier of the trial's";

  for (int k = 0; k < 40; ++k) allreduce_of_matches_library(comm, 700, round++);
  EXPECT_EQ(calls("two_level"), tried) << "spared at 700 doubles";
  EXPECT_GE(alg::trial_counts().spared, 1u);
  EXPECT_EQ(alg::trial_counts().not_taken, at_350.not_taken);

  for (int k = 0; k < 40; ++k) allreduce_of_matches_library(comm, 1400, round++);
  EXPECT_GT(calls("two_level"), tried) << "tried again at 1,400 doubles";
  EXPECT_GT(alg::trial_counts().not_taken, at_350.not_taken);
  alg::no_handicaps_for_testing();
  EXPECT_TRUE(same_on_every_rank(calls("two_level"), comm)) << "every rank runs the same side";
  PMPI_Comm_free(&comm);
  set_trial("0");
}

// A broadcast whose root moves on every call: binomial (the model's choice
// for a moved root) is tried on those calls alone, keyed without the root,
// and every rank receives the root's data throughout.
TEST_F(ProfileLoading, AMovedRootsChoiceIsTriedAcrossRoots) {
  const int p = world_size(), me = world_rank();
  if (p < 2) GTEST_SKIP() << "one rank passes through";
  set_trial("2");
  ASSERT_EQ(load(file("roots.json", topo::profile_text(profile_where_binomial_leads_a_moved_root()))).info.status,
            ProfileStatus::loaded);
  MPI_Comm comm = MPI_COMM_NULL;
  comm = seen_duplicate();
  auto count = [](const char* algorithm) { return calls_of(alg::Collective::bcast, algorithm); };
  std::vector<int> buf(128);
  int round = 0;
  auto bcast_from = [&](int root) {
    ++round;
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = me == root ? static_cast<int>(i) * 5 + round : -1;
    ASSERT_EQ(MPI_Bcast(buf.data(), static_cast<int>(buf.size()), MPI_INT, root, comm), MPI_SUCCESS);
    for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], static_cast<int>(i) * 5 + round) << "round " << round;
  };
  // A block: one untimed call, then whole turns of the root over the
  // ranks, three calls at least (up to 8 ranks).
  const int block = p <= 8 ? 1 + p * ((3 + p - 1) / p) : 4;
  const auto blocks = static_cast<uint64_t>(block);
  bcast_from(0);  // the root is now 0: the library, untried
  alg::reset_collectives_counts();
  alg::reset_trial_counts();
  for (int k = 1; k <= 2 * block; ++k) bcast_from(k % p);  // a block of each
  EXPECT_EQ(count("binomial"), blocks);
  EXPECT_EQ(count("library"), blocks);
  EXPECT_EQ(alg::trial_counts().kept + alg::trial_counts().dropped, 1u);
  // Blocks of whole turns run as the job's calls come, without a barrier
  // of the trial's before each (up to 8 ranks).
  if (p <= 8) EXPECT_EQ(alg::trial_counts().barriers, 0u);
  for (int k = 0; k < 3; ++k) bcast_from(2 * block % p);  // the root stays: the library, as before
  for (int k = 2 * block + 1; k <= 2 * block + 4; ++k) bcast_from(k % p);
  const uint64_t binomial = count("binomial");
  EXPECT_TRUE(binomial == blocks || binomial == blocks + 4u) << binomial;
  EXPECT_EQ(binomial == blocks + 4u, alg::trial_counts().kept == 1u);
  PMPI_Comm_free(&comm);
  set_trial("0");
}

}  // namespace
}  // namespace veneer::test
