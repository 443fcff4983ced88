#pragma once
// The selector: among the algorithms a rule allows and whose preconditions
// hold, the one with the least predicted time, unless the library's own
// estimate is close enough that the model's error could reverse the ranking.
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/cost_model.h"
#include "algorithms/tuning.h"

namespace veneer::algorithms {

struct Choice {
  const Algorithm* algorithm = nullptr;  // nullptr: the library
  double predicted_seconds = 0;          // of the chosen one
  double library_seconds = 0;
  std::string reason;
};

Choice choose(const Shape& s, const Tuning& t, const CostModel& m);

// Every algorithm of the collective with its predicted time or why it is not
// eligible, the rule in force, and the choice. For logs and `explain`.
std::string explain(const Shape& s, const Tuning& t, const CostModel& m);

// "8 ranks on 4 nodes (2 per node, node-consecutive), commutative op, in place".
std::string describe(const Shape& s);

}  // namespace veneer::algorithms
