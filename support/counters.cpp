// SPDX-License-Identifier: BSD-3-Clause
#include "support/counters.h"

#include "support/config.h"

namespace veneer {
constinit Counters g_counters;

ScopedTimer::ScopedTimer() : on_(config().report != 0) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

void ScopedTimer::stop() {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
  counters().add(Counter::nanoseconds, static_cast<uint64_t>(ns.count()));
}
}  // namespace veneer
