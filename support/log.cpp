// SPDX-License-Identifier: BSD-3-Clause
#include "support/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace veneer {
namespace {
std::atomic<int> g_rank{-1};
}

void set_log_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void log(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) > static_cast<int>(config().log_level)) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "veneer[%d]: %s\n", g_rank.load(std::memory_order_relaxed), line);
}
}  // namespace veneer
