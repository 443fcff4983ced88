// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include "support/config.h"

namespace veneer {
// printf-style message to stderr, prefixed "veneer[rank]: ", when `level` is enabled.
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Whether `level` is enabled: ask before building a message's arguments
// (a type's description at every decode cost more than the decode itself).
inline bool logs(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(config().log_level); }
void set_log_rank(int rank);
}  // namespace veneer
