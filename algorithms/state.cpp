// SPDX-License-Identifier: BSD-3-Clause
// The rules and the model, set at MPI_Init (or by tests) and read by every decision.
#include "algorithms/state.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "algorithms/collectives.h"
#include "algorithms/decisions.h"
#include "algorithms/measured.h"
#include "datatypes/cache.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {
namespace {
std::atomic<std::shared_ptr<const Tuning>> g_tuning;
std::atomic<std::shared_ptr<const CostModel>> g_model;
}  // namespace

std::shared_ptr<const Tuning> current_tuning() {
  auto t = g_tuning.load();
  if (!t) {
    static std::once_flag once;
    std::call_once(once, [] {
      if (!g_tuning.load()) g_tuning.store(std::make_shared<const Tuning>(Tuning::from_env()));
    });
    t = g_tuning.load();
  }
  return t;
}

std::shared_ptr<const CostModel> current_model() {
  auto m = g_model.load();
  if (!m) {
    static const auto fallback = std::make_shared<const CostModel>(default_cost_model());
    return fallback;
  }
  return m;
}

void collectives_init() {
  auto tuning = std::make_shared<const Tuning>(Tuning::from_env());
  count_buckets_for(*tuning);
  g_tuning.store(std::move(tuning));
  forget_decisions();
  // Decisions about derived types are remembered by handle: a freed type's
  // handle may come back as another type.
  datatypes::set_freed_type_hook(&forget_decisions);
}

void collectives_finalize() {
  datatypes::set_freed_type_hook(nullptr);
  decisions_finalize();
  topology::forget_hierarchy(MPI_COMM_WORLD);
}

void set_cost_model(const CostModel& m) {
  g_model.store(std::make_shared<const CostModel>(m));
  forget_decisions();
}

void set_profile(const topology::Profile& p) { set_cost_model(cost_model_from_profile(p)); }

const CostModel& cost_model() {
  // Models are replaced rarely; each one is kept alive for the process so references stay valid.
  static std::mutex keep_mutex;
  static std::vector<std::shared_ptr<const CostModel>> kept;
  auto m = current_model();
  std::lock_guard<std::mutex> lock(keep_mutex);
  if (kept.empty() || kept.back() != m) kept.push_back(m);
  return *kept.back();
}

}  // namespace veneer::algorithms
