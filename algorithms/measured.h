// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The measured half of the cost model: a machine profile's collective timings
// (topology/profile.h) arranged for the selector, the prediction at any size
// from them, the profile's per-level fits as a CostModel, and loading the
// profile at MPI_Init so that every rank holds the same one.
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/cost_model.h"
#include "support/send_rule.h"
#include "topology/profile.h"

namespace veneer::algorithms {

struct MeasuredPoint {
  double seconds = 0;   // 0: not measured at this size
  double spread = 0;    // relative
  bool behind = false;  // slower than the library beyond behind_tolerance in a condition of its pattern
};

// One collective on one communicator shape, on a ladder of sizes.
struct MeasuredSeries {
  Collective collective = Collective::allreduce;
  int ranks = 0;
  int nodes = 0;
  int max_ranks_per_node = 0;
  int min_ranks_per_node = 0;
  bool node_consecutive = true;
  std::vector<int64_t> bytes;                     // ascending
  std::vector<std::vector<MeasuredPoint>> times;  // [candidate][size]: 0 the library, k algorithms_for(c)[k - 1]
  // The same for calls whose root moved (topology::Timing::worst_moving);
  // empty where no point of the series timed a rotating root.
  std::vector<std::vector<MeasuredPoint>> moving;
  // The same for the first call since a barrier (topology::Timing::worst_after_barrier).
  std::vector<std::vector<MeasuredPoint>> after_barrier;

  bool matches(const Shape& s) const;
};

struct MeasuredTable {
  std::vector<MeasuredSeries> series;
  const MeasuredSeries* find(const Shape& s) const;  // nullptr: no points for this shape
};

// Candidate index in a series: 0 for the library (nullptr), else 1 + its place in algorithms_for().
size_t candidate_index(const Algorithm* a);

// Time of candidate `k` at `bytes` from the series: the measured point, or
// linear interpolation in log(bytes)-log(seconds) between the nearest measured
// sizes below and above, or beyond the candidate's measured range an
// extrapolation from its two nearest points (slope clamped to [0, 2]; one
// point: constant below, proportional above). Spread: the larger of the two
// points'. Unknown (seconds infinite) when the candidate has no point here.
// `behind`: the point's, or either neighbour's where interpolated.
// `moving_root`: from the moving-root times where the series has them;
// `after_barrier` (where the root did not move): from the after-barrier times.
Prediction predict_measured(const MeasuredSeries& series, size_t k, int64_t bytes, bool moving_root = false,
                            bool after_barrier = false);

// The profile's collective points as a table (unknown collectives and
// algorithm names are skipped; they may come from another Veneer build).
MeasuredTable table_from_profile(const topology::Profile& p);
// The cost model of a profile: its fitted levels (defaults for a level it
// lacks), its NIC streams and its measured table.
CostModel cost_model_from_profile(const topology::Profile& p);

// The typed-send take-over rules of a profile's "p2p" section: its "intra"
// and "inter" tables as per-peer-level outcomes (win, loss, neither; beyond
// both measured spreads, topology::p2p_outcome). Empty without the section.
SendRules send_rules_from_profile(const topology::Profile& p);

// What happened to the profile at MPI_Init, for logs, explain and the report.
struct ProfileInfo {
  topology::ProfileStatus status = topology::ProfileStatus::missing;
  std::string path;         // empty: none looked at
  std::string fingerprint;  // digest, when loaded
  std::string why;          // one line
  bool loaded() const { return status == topology::ProfileStatus::loaded; }
  // "profile /x/profile.json (fingerprint 0123...)" or "built-in defaults: <why>".
  std::string describe() const;
};

// Collective over comm (MPI_COMM_WORLD at MPI_Init): rank 0 reads the profile
// (topology::profile_path()) and validates it (JSON, format and version, its
// fingerprint against its own), then broadcasts the accepted text (or none)
// with PMPI_Bcast, and every rank installs the same model (set_profile), or
// the built-in defaults. Missing, corrupt, outdated or foreign profiles: one
// warning on rank 0 (a missing file at the default path is only info). A
// profile with send tables also installs them (set_profile_send_rules) and
// learns every world rank's node for them (one allgather). Never
// fails and creates no communicators. `enabled` false (Veneer or its
// collectives off on rank 0): rank 0 reads nothing and all ranks keep the defaults.
ProfileInfo load_profile(MPI_Comm comm, bool enabled = true);

// The last outcome of load_profile (or "not loaded" before it).
ProfileInfo profile_info();

}  // namespace veneer::algorithms
