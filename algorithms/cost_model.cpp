// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/cost_model.h"

#include <algorithm>
#include <limits>

#include "algorithms/algorithm.h"
#include "algorithms/measured.h"

namespace veneer::algorithms {

const CostModel& default_cost_model() {
  static const CostModel model;
  return model;
}

int ceil_log2(int64_t p) {
  int steps = 0;
  for (int64_t reach = 1; reach < p; reach <<= 1) ++steps;
  return steps;
}

int floor_pow2(int p) {
  int pof2 = 1;
  while (pof2 <= p / 2) pof2 *= 2;
  return pof2;
}

const LinkCost& flat_link(const Shape& s, const CostModel& m) { return s.nodes > 1 ? m.inter : m.intra; }

LinkCost crowded_link(const Shape& s, const CostModel& m) {
  if (s.nodes <= 1) return m.intra;
  LinkCost l = m.inter;
  l.beta *= std::max(1.0, static_cast<double>(s.max_ranks_per_node) / std::max(1, m.nic_streams));
  return l;
}

LinkCost link_at_distance(const Shape& s, const CostModel& m, int64_t distance) {
  if (s.nodes <= 1) return m.intra;
  const bool within = s.node_consecutive && s.equal_ranks_per_node && s.max_ranks_per_node % (2 * distance) == 0;
  return within ? m.intra : crowded_link(s, m);
}

std::string_view source_name(Source s) {
  switch (s) {
    case Source::measured: return "measured";
    case Source::interpolated: return "interpolated";
    case Source::extrapolated: return "extrapolated";
    case Source::other_ranks: return "other ranks";
    case Source::fitted: return "fitted";
    case Source::defaults: return "default";
  }
  return "?";
}

const MeasuredSeries* measured_series(const Shape& s, const CostModel& m) {
  return m.measured ? m.measured->find(s) : nullptr;
}

Prediction predict(const Shape& s, const Algorithm* a, const CostModel& m, const MeasuredSeries* series) {
  if (series) return predict_measured(*series, candidate_index(a), s.bytes, s.moving_root, s.after_barrier);
  Prediction p;
  p.seconds = a ? a->predicted_seconds(s, m) : library_seconds(s, m);
  const bool fitted = m.fitted_intra && (s.nodes <= 1 || m.fitted_inter);
  p.source = fitted ? Source::fitted : Source::defaults;
  return p;
}

double formula_margin(const Shape& s, const CostModel& m) {
  const bool fitted = m.fitted_intra && (s.nodes <= 1 || m.fitted_inter);
  if (!fitted) return s.oversubscribed ? m.oversubscribed_margin : m.library_margin;
  // The fits' error bounds how far either prediction may be off.
  const double e = std::max(0.0, m.fit_error);
  double margin = std::clamp((1 - e) / (1 + e), 0.5, 0.95);
  if (s.oversubscribed) margin = std::min(margin, m.oversubscribed_margin);
  return margin;
}

bool beats_library(const Prediction& best, const Prediction& library, const Shape& s, const CostModel& m) {
  if (!best.known()) return false;
  if (!library.known()) return true;
  if (best.from_measurements() && library.from_measurements()) {
    const double sb = std::clamp(best.spread, min_spread, max_spread);
    const double sl = std::clamp(library.spread, min_spread, max_spread);
    return best.seconds * (1 + sb) < library.seconds * (1 - sl);
  }
  return best.seconds < formula_margin(s, m) * library.seconds;
}

double library_seconds(const Shape& s, const CostModel& m) {
  double best = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : algorithms_for(s.collective))
    if (!a->hierarchical) best = std::min(best, a->predicted_seconds(s, m));
  return best * m.library_factor;
}

}  // namespace veneer::algorithms
