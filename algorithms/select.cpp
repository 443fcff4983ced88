#include "algorithms/select.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace veneer::algorithms {
namespace {

bool allows(const Rule* rule, std::string_view name) {
  return !rule || rule->choices.empty() || std::find(rule->choices.begin(), rule->choices.end(), name) != rule->choices.end();
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3e s", s);
  return text;
}

}  // namespace

Choice choose(const Shape& s, const Tuning& t, const CostModel& m) {
  Choice c;
  c.library_seconds = library_seconds(s, m);
  c.predicted_seconds = c.library_seconds;
  bool from_user = false;
  const Rule* rule = t.rule_for(s.collective, s.bytes, &from_user);
  const std::string source = rule ? std::string(from_user ? override_variable(s.collective) : "built-in rule") +
                                        " (" + rule->text + ")"
                                  : std::string("no rule");
  if (rule && rule->choices.size() == 1) {
    const std::string& name = rule->choices[0];
    const Algorithm* forced = find_algorithm(s.collective, name);
    std::string why;
    if (!forced) {
      c.reason = "library forced by " + source;
    } else if (eligible(*forced, s, &why)) {
      c.algorithm = forced;
      c.predicted_seconds = forced->predicted_seconds(s, m);
      c.reason = "forced by " + source;
    } else {
      c.reason = name + " forced by " + source + " but " + why + ": library";
    }
    return c;
  }
  const Algorithm* best = nullptr;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : algorithms_for(s.collective)) {
    if (!allows(rule, a->name) || !eligible(*a, s)) continue;
    double predicted = a->predicted_seconds(s, m);
    if (predicted < best_seconds) {
      best = a;
      best_seconds = predicted;
    }
  }
  const double margin = s.oversubscribed ? m.oversubscribed_margin : m.library_margin;
  if (!best) {
    c.reason = "no eligible algorithm under " + source + ": library";
  } else if (allows(rule, "library") && !(best_seconds < margin * c.library_seconds)) {
    char text[160];
    std::snprintf(text, sizeof text, "cost model under %s: best, %s, not below %.2f x the library's estimate",
                  source.c_str(), std::string(best->name).c_str(), margin);
    c.reason = text;
  } else {
    c.algorithm = best;
    c.predicted_seconds = best_seconds;
    c.reason = "cost model under " + source;
  }
  return c;
}

std::string describe(const Shape& s) {
  std::string d = std::string(collective_name(s.collective)) + ", " + std::to_string(s.bytes) + " bytes, " +
                  std::to_string(s.ranks) + " ranks on " + std::to_string(s.nodes) + " node" +
                  (s.nodes == 1 ? "" : "s") + " (";
  d += s.equal_ranks_per_node ? std::to_string(s.max_ranks_per_node) + " per node"
                              : std::to_string(s.min_ranks_per_node) + "-" + std::to_string(s.max_ranks_per_node) +
                                    " per node";
  d += s.node_consecutive ? ", node-consecutive)" : ", not node-consecutive)";
  d += s.commutative ? "" : ", non-commutative op";
  if (!s.predefined_op) d += ", user op";
  if (s.in_place) d += ", in place";
  if (s.oversubscribed) d += ", oversubscribed";
  return d;
}

std::string explain(const Shape& s, const Tuning& t, const CostModel& m) {
  std::string out = describe(s) + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-22s predicted %s\n", "library", seconds_text(library_seconds(s, m)).c_str());
  out += line;
  for (const Algorithm* a : algorithms_for(s.collective)) {
    std::string why;
    if (eligible(*a, s, &why))
      std::snprintf(line, sizeof line, "  %-22s predicted %s\n", std::string(a->name).c_str(),
                    seconds_text(a->predicted_seconds(s, m)).c_str());
    else
      std::snprintf(line, sizeof line, "  %-22s not eligible: %s\n", std::string(a->name).c_str(), why.c_str());
    out += line;
  }
  Choice c = choose(s, t, m);
  out += "chosen: " + std::string(c.algorithm ? c.algorithm->name : "library") + " (" + c.reason + ")\n";
  return out;
}

}  // namespace veneer::algorithms
