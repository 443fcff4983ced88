// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include "support/config.h"

namespace veneer {
// printf-style message to stderr, prefixed "veneer[rank]: ", when `level` is enabled.
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void set_log_rank(int rank);
}  // namespace veneer
