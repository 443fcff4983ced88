// SPDX-License-Identifier: BSD-3-Clause
// The entry points tests and benchmarks use to look at a selection or to
// bypass it: the shape a call has, what would be chosen, and a run with a
// named algorithm (collectives.h).
#include <optional>
#include <string>

#include "algorithms/admission.h"
#include "algorithms/collectives.h"
#include "algorithms/execution.h"
#include "algorithms/select.h"
#include "algorithms/state.h"

namespace veneer::algorithms {

std::optional<Shape> shape_of(const Call& call, const Hierarchy& h) {
  auto s = admit(call, h.size, nullptr);
  if (s) place(*s, h);
  return s;
}

std::string_view chosen_for(const Call& call, const Hierarchy& h) {
  auto s = shape_of(call, h);
  if (!s) return "library";
  const Choice c = choose(*s, *current_tuning(), *current_model());
  return c.algorithm ? c.algorithm->name : std::string_view("library");
}

std::optional<int> run_with(std::string_view algorithm, const Call& call, const Hierarchy& h, std::string* why_not) {
  auto s = admit(call, h.size, why_not);
  if (!s) return std::nullopt;
  place(*s, h);
  if (algorithm == "library") return run_library(call, h.parent);
  const Algorithm* a = find_algorithm(call.collective, algorithm);
  if (!a) {
    if (why_not) *why_not = "unknown algorithm";
    return std::nullopt;
  }
  if (!eligible(*a, *s, why_not)) return std::nullopt;
  if (s->bytes == 0) return MPI_SUCCESS;  // nothing to move; buffers untouched
  return execute(*a, call, h);
}

}  // namespace veneer::algorithms
