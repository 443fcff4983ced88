// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/measured.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "algorithms/collectives.h"
#include "support/config.h"
#include "support/log.h"
#include "topology/peer_level.h"

namespace veneer::algorithms {
namespace {

bool measured_at(const MeasuredPoint& p) { return p.seconds > 0; }

// t(x) from (x0, t0) with log-log slope `slope`.
double along(double x0, double t0, double slope, double x) { return t0 * std::pow(x / x0, slope); }

double slope_between(double x0, double t0, double x1, double t1) { return std::log(t1 / t0) / std::log(x1 / x0); }

std::mutex g_info_mutex;
ProfileInfo g_info{topology::ProfileStatus::off, "", "", "not loaded (MPI_Init was not seen)"};

void remember(const ProfileInfo& info) {
  std::lock_guard<std::mutex> lock(g_info_mutex);
  g_info = info;
}

// Whether `mine` was slower than the library's `lib` by more than
// behind_tolerance in one of the conditions a call of the pattern is scored
// by (only conditions both were timed in count).
enum class Row { steady, moving, after_barrier };
bool behind_library(const topology::Timing& mine, const topology::Timing& lib, Row row) {
  auto behind = [](double a, double l) { return a > 0 && l > 0 && a > l * (1 + behind_tolerance); };
  auto fresh = [](const topology::Timing& t) { return t.patterns > 0 ? t.patterns : t.median; };
  const bool heap = behind(mine.returned, lib.returned);
  switch (row) {
    case Row::moving:
      if (mine.rotating > 0 && lib.rotating > 0) return heap || behind(mine.rotating, lib.rotating);
      [[fallthrough]];
    case Row::steady: return heap || behind(mine.median, lib.median) || behind(mine.patterns, lib.patterns);
    case Row::after_barrier: return heap || behind(fresh(mine), fresh(lib));
  }
  return false;
}

}  // namespace

bool MeasuredSeries::matches(const Shape& s) const {
  return s.collective == collective && s.ranks == ranks && s.nodes == nodes &&
         s.max_ranks_per_node == max_ranks_per_node && s.min_ranks_per_node == min_ranks_per_node &&
         s.node_consecutive == node_consecutive;
}

const MeasuredSeries* MeasuredTable::find(const Shape& s) const {
  for (const MeasuredSeries& m : series)
    if (m.matches(s)) return &m;
  return nullptr;
}

size_t candidate_index(const Algorithm* a) {
  if (!a) return 0;
  auto list = algorithms_for(a->collective);
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == a) return i + 1;
  return 0;
}

Prediction predict_measured(const MeasuredSeries& series, size_t k, int64_t bytes, bool moving_root,
                            bool after_barrier) {
  Prediction out;
  const auto& rows = moving_root && !series.moving.empty()                            ? series.moving
                     : !moving_root && after_barrier && !series.after_barrier.empty() ? series.after_barrier
                                                                                      : series.times;
  if (k >= rows.size()) return out;
  const std::vector<MeasuredPoint>& t = rows[k];
  const std::vector<int64_t>& x = series.bytes;
  const size_t n = std::min(t.size(), x.size());
  const double at = static_cast<double>(std::max<int64_t>(1, bytes));
  // The nearest measured sizes below and above (or equal).
  size_t below = n, above = n;
  for (size_t i = 0; i < n; ++i) {
    if (!measured_at(t[i])) continue;
    if (x[i] == bytes) {
      out.seconds = t[i].seconds;
      out.spread = t[i].spread;
      out.behind = t[i].behind;
      out.source = Source::measured;
      return out;
    }
    if (x[i] < bytes) below = i;
    else if (above == n) above = i;
  }
  auto next_measured = [&](size_t from, int step) -> size_t {
    for (size_t i = from + static_cast<size_t>(step); i < n; i += static_cast<size_t>(step))
      if (measured_at(t[i])) return i;
    return n;  // (size_t wrap-around below 0 also ends here)
  };
  const auto point = [&](size_t i) { return std::pair<double, double>(static_cast<double>(x[i]), t[i].seconds); };
  if (below < n && above < n) {
    auto [x0, t0] = point(below);
    auto [x1, t1] = point(above);
    out.seconds = along(x0, t0, slope_between(x0, t0, x1, t1), at);
    out.spread = std::max(t[below].spread, t[above].spread);
    out.behind = t[below].behind || t[above].behind;
    out.source = Source::interpolated;
    return out;
  }
  if (below == n && above == n) return out;  // no point for this candidate
  // Beyond the measured range: from the nearest point and its neighbour inward.
  const size_t near = below < n ? below : above;
  const size_t inner = next_measured(near, below < n ? -1 : 1);
  auto [x0, t0] = point(near);
  double slope = below < n ? 1.0 : 0.0;  // one point: proportional above, constant below
  if (inner < n) {
    auto [x1, t1] = point(inner);
    slope = std::clamp(slope_between(x0, t0, x1, t1), 0.0, 2.0);
  }
  out.seconds = along(x0, t0, slope, at);
  out.spread = inner < n ? std::max(t[near].spread, t[inner].spread) : t[near].spread;
  out.behind = t[near].behind;
  out.source = Source::extrapolated;
  return out;
}

MeasuredTable table_from_profile(const topology::Profile& p) {
  MeasuredTable table;
  for (const topology::CollectivePoint& point : p.collectives) {
    auto c = collective_from_name(point.collective);
    if (!c) continue;
    MeasuredSeries* series = nullptr;
    for (MeasuredSeries& m : table.series)
      if (m.collective == *c && m.ranks == point.ranks && m.nodes == point.nodes &&
          m.max_ranks_per_node == point.ranks_per_node && m.min_ranks_per_node == point.min_ranks_per_node &&
          m.node_consecutive == point.node_consecutive)
        series = &m;
    if (!series) {
      MeasuredSeries m;
      m.collective = *c;
      m.ranks = point.ranks;
      m.nodes = point.nodes;
      m.max_ranks_per_node = point.ranks_per_node;
      m.min_ranks_per_node = point.min_ranks_per_node;
      m.node_consecutive = point.node_consecutive;
      m.times.resize(1 + algorithms_for(*c).size());
      m.after_barrier.resize(m.times.size());
      table.series.push_back(std::move(m));
      series = &table.series.back();
    }
    // The size's slot, kept in ascending order.
    auto where = std::lower_bound(series->bytes.begin(), series->bytes.end(), point.bytes);
    const size_t slot = static_cast<size_t>(where - series->bytes.begin());
    if (where == series->bytes.end() || *where != point.bytes) {
      series->bytes.insert(where, point.bytes);
      for (auto& row : series->times) row.insert(row.begin() + static_cast<long>(slot), MeasuredPoint{});
      for (auto& row : series->moving) row.insert(row.begin() + static_cast<long>(slot), MeasuredPoint{});
      for (auto& row : series->after_barrier) row.insert(row.begin() + static_cast<long>(slot), MeasuredPoint{});
    }
    const topology::Timing* library = nullptr;
    for (const auto& [name, timing] : point.times)
      if (name == "library") library = &timing;
    auto behind = [&](const topology::Timing& t, Row row) { return library && behind_library(t, *library, row); };
    for (const auto& [name, timing] : point.times) {
      size_t k = 0;
      if (name != "library") {
        const Algorithm* a = find_algorithm(*c, name);
        if (!a) continue;
        k = candidate_index(a);
      }
      // Each pattern by the slowest of its conditions (the slower heap state).
      series->times[k][slot] = MeasuredPoint{timing.worst(), timing.spread, behind(timing, Row::steady)};
      series->after_barrier[k][slot] =
          MeasuredPoint{timing.worst_after_barrier(), timing.spread, behind(timing, Row::after_barrier)};
      if (timing.rotating > 0 && series->moving.empty())  // the fixed-root times where no rotation was timed
        series->moving = series->times;
      if (!series->moving.empty())
        series->moving[k][slot] = MeasuredPoint{timing.worst_moving(), timing.spread, behind(timing, Row::moving)};
    }
  }
  return table;
}

CostModel cost_model_from_profile(const topology::Profile& p) {
  CostModel m = default_cost_model();
  auto level = [](const topology::LevelFit& f, LinkCost& into) {
    into.alpha = f.alpha;
    into.beta = f.beta;
    if (f.gamma > 0) into.gamma = f.gamma;
  };
  if (p.intra) {
    level(*p.intra, m.intra);
    m.fitted_intra = true;
    m.fit_error = std::max(m.fit_error, p.intra->fit_error);
  }
  if (p.inter) {
    level(*p.inter, m.inter);
    m.fitted_inter = true;
    m.fit_error = std::max(m.fit_error, p.inter->fit_error);
  } else if (p.intra && p.intra->gamma > 0) {
    m.inter.gamma = p.intra->gamma;  // reducing is local work, whatever the level
  }
  if (p.nic_streams > 0) m.nic_streams = p.nic_streams;
  auto table = std::make_shared<MeasuredTable>(table_from_profile(p));
  if (!table->series.empty()) m.measured = std::move(table);
  return m;
}

SendRules send_rules_from_profile(const topology::Profile& p) {
  SendRules rules;
  if (!p.p2p) return rules;
  auto table = [](const topology::P2pLevel& level) {
    SendTable t;
    // Ties fall back on the level's own block threshold and the built-in smallest message.
    t.tie_max_block = topology::p2p_max_block(level.points);
    t.tie_min_bytes = VENEER_DEFAULT_P2P_MIN_BYTES;
    for (const topology::P2pPoint& point : level.points) {
      const topology::P2pOutcome o = topology::p2p_outcome(point);
      t.set(point.block, point.bytes,
            o == topology::P2pOutcome::win    ? SendTable::Outcome::win
            : o == topology::P2pOutcome::loss ? SendTable::Outcome::loss
                                              : SendTable::Outcome::none);
    }
    return t;
  };
  if (p.p2p->intra && !p.p2p->intra->points.empty()) rules.same_node = table(*p.p2p->intra);
  if (p.p2p->inter && !p.p2p->inter->points.empty()) rules.other_node = table(*p.p2p->inter);
  return rules;
}

std::string ProfileInfo::describe() const {
  if (loaded()) return "profile " + path + " (fingerprint " + fingerprint + ")";
  return "built-in defaults: " + std::string(topology::status_name(status)) + (why.empty() ? "" : " (" + why + ")");
}

ProfileInfo profile_info() {
  std::lock_guard<std::mutex> lock(g_info_mutex);
  return g_info;
}

namespace {

// Every world rank's node, for the send rules (built-in or the profile's):
// one allgather on MPI_COMM_WORLD, so only where every rank of it calls
// (load_profile on MPI_COMM_WORLD, after the shared broadcast).
bool learn_nodes(MPI_Comm comm) {
  topology::forget_world_nodes();
  return comm == MPI_COMM_WORLD && topology::learn_world_nodes();
}

// The built-in cost model, thresholds and send rules: what a job runs with
// when no profile is taken. `comm`: the communicator every rank loads on, to
// learn the nodes with; MPI_COMM_NULL where the ranks may not all be here.
void use_defaults(MPI_Comm comm) {
  set_cost_model(default_cost_model());
  set_profile_thresholds(std::nullopt, std::nullopt);
  set_profile_send_rules(nullptr);
  learn_nodes(comm);
}

}  // namespace

ProfileInfo load_profile(MPI_Comm comm, bool enabled) {
  using topology::ProfileStatus;
  ProfileInfo info;
  int rank = 0;
  if (const int rc = PMPI_Comm_rank(comm, &rank); rc != MPI_SUCCESS) {
    // No rank, so no way to join rank 0's broadcast: this rank keeps the defaults.
    log(LogLevel::warn, "machine profile not used: MPI_Comm_rank failed (error %d)", rc);
    info.status = ProfileStatus::unreadable;
    info.why = "MPI_Comm_rank failed";
    use_defaults(MPI_COMM_NULL);
    remember(info);
    return info;
  }
  std::string text;  // what rank 0 accepted
  bool explicit_path = false;
  info.path = topology::profile_path(&explicit_path);
  if (rank == 0) {
    if (!enabled) {
      info.status = ProfileStatus::off;
      info.why = "Veneer's collectives are off";
    } else if (info.path.empty()) {
      info.status = ProfileStatus::off;
      info.why = "VENEER_PROFILE=off";
    } else {
      const topology::Fingerprint mine = topology::current_fingerprint();
      topology::ProfileCheck check = topology::read_profile(info.path, &mine);
      info.status = check.status;
      info.why = check.why;
      if (check.profile) {
        info.fingerprint = check.profile->fingerprint.digest();
        // Send the profile as read back from its own values: other ranks parse exactly what rank 0 accepted.
        text = topology::profile_text(*check.profile);
      }
    }
  }
  // One broadcast of the lengths, one of the bytes: [status, text length, why length, fingerprint length].
  long long header[4] = {static_cast<long long>(info.status), static_cast<long long>(text.size()),
                         static_cast<long long>(info.why.size()), static_cast<long long>(info.fingerprint.size())};
  if (PMPI_Bcast(header, 4, MPI_LONG_LONG, 0, comm) != MPI_SUCCESS) header[0] = -1;
  std::string payload;
  if (header[0] >= 0) {
    const size_t total = static_cast<size_t>(header[1] + header[2] + header[3]);
    payload = rank == 0 ? text + info.why + info.fingerprint : std::string(total, '\0');
    if (total > 0 && total < static_cast<size_t>(INT32_MAX) &&
        PMPI_Bcast(payload.data(), static_cast<int>(total), MPI_CHAR, 0, comm) != MPI_SUCCESS)
      header[0] = -1;
  }
  if (header[0] < 0) {  // the broadcast failed: every rank keeps the defaults
    info.status = ProfileStatus::unreadable;
    info.why = "could not share the profile from rank 0";
    info.fingerprint.clear();
    use_defaults(MPI_COMM_NULL);
    remember(info);
    return info;
  }
  info.status = static_cast<ProfileStatus>(header[0]);
  text = payload.substr(0, static_cast<size_t>(header[1]));
  info.why = payload.substr(static_cast<size_t>(header[1]), static_cast<size_t>(header[2]));
  info.fingerprint = payload.substr(static_cast<size_t>(header[1] + header[2]));
  bool installed = false;
  if (info.status == ProfileStatus::loaded) {
    // Rank 0 checked the fingerprint; every rank takes its choice, so all decide alike.
    topology::ProfileCheck shared = topology::profile_from_text(text, nullptr);
    if (shared.profile) {
      set_profile(*shared.profile);
      // The send/receive take-over threshold: the typed send's break-even.
      // Not Alltoallv/w's: their blocks share one staging buffer and one
      // library call, so that break-even does not apply; they keep the
      // per-library built-in VENEER_ALLTOALL_MAX_BLOCK.
      const std::optional<int64_t> max_block =
          shared.profile->p2p ? shared.profile->p2p->takeover_max_block() : std::nullopt;
      // MPI_Pack's own: the "pack" table's threshold, when measured.
      const std::optional<int64_t> pack_max_block = shared.profile->p2p && shared.profile->p2p->pack
                                                        ? std::optional<int64_t>(shared.profile->p2p->pack->max_block)
                                                        : std::nullopt;
      set_profile_thresholds(max_block, std::nullopt, pack_max_block);
      // Typed sends: the per-peer-level tables, and every world rank's node to
      // look levels up (every rank holds the same profile: all or none join the allgather).
      auto rules = std::make_shared<const SendRules>(send_rules_from_profile(*shared.profile));
      if (learn_nodes(comm) && !rules->empty()) set_profile_send_rules(std::move(rules));
      else set_profile_send_rules(nullptr);
      installed = true;
    } else {
      info.status = ProfileStatus::corrupt;
      info.why = "the shared profile did not read back: " + shared.why;
    }
  }
  if (!installed) use_defaults(comm);
  if (rank == 0) {
    if (installed) log(LogLevel::info, "%s: %s", info.describe().c_str(), info.why.c_str());
    else if (info.status == ProfileStatus::off || (info.status == ProfileStatus::missing && !explicit_path))
      log(LogLevel::info, "no calibrated profile, %s", info.describe().c_str());
    else
      log(LogLevel::warn, "machine profile not used, %s; run veneer-calibrate to measure this machine",
          info.describe().c_str());
  }
  remember(info);
  return info;
}

}  // namespace veneer::algorithms
