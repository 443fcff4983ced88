// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The process-wide state every decision reads: the tuning rules and the cost
// model, each replaced as a whole (collectives_init, set_cost_model) and read
// without a lock.
#include <memory>

#include "algorithms/cost_model.h"
#include "algorithms/tuning.h"

namespace veneer::algorithms {

// The rules in force (read from the environment on first use, if collectives_init was not called).
std::shared_ptr<const Tuning> current_tuning();
// The model in force (the built-in defaults until one is set).
std::shared_ptr<const CostModel> current_model();

}  // namespace veneer::algorithms
