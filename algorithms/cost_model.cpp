#include "algorithms/cost_model.h"

#include <algorithm>
#include <limits>

#include "algorithms/algorithm.h"

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

double library_seconds(const Shape& s, const CostModel& m) {
  double best = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : algorithms_for(s.collective))
    if (!a->hierarchical) best = std::min(best, a->predicted_seconds(s, m));
  return best * m.library_factor;
}

}  // namespace veneer::algorithms
