// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Counters for the end-of-run report. Relaxed atomics, touched only while the
// report is on (VENEER_REPORT): otherwise every call would pay for shared
// atomic increments that nobody reads.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "support/config.h"

namespace veneer {

enum class Counter : int {
  pack_taken,
  pack_passed,
  unpack_taken,
  unpack_passed,
  send_taken,
  send_passed,
  recv_taken,
  recv_passed,
  alltoall_taken,
  alltoall_passed,
  coll_taken,
  coll_passed,
  bytes_packed,
  bytes_unpacked,
  nanoseconds,
  device_oneshot,
  device_staged,
  device_on_device,
  device_passed,
  device_via_host,
  device_combines,
  alltoall_blocks_staged,
  alltoall_blocks_typed,
  alltoall_blocks_runs,
  count_  // number of counters
};

inline constexpr const char* counter_name(Counter c) {
  constexpr const char* names[] = {"pack taken over",
                                   "pack passed through",
                                   "unpack taken over",
                                   "unpack passed through",
                                   "sends taken over",
                                   "sends passed through",
                                   "receives taken over",
                                   "receives passed through",
                                   "alltoallv/w taken over",
                                   "alltoallv/w passed through",
                                   "collectives taken over",
                                   "collectives passed through",
                                   "bytes packed",
                                   "bytes unpacked",
                                   "ns in veneer",
                                   "device moves one-shot",
                                   "device moves staged",
                                   "device moves on device",
                                   "device buffers passed through",
                                   "device moves through a host copy of the span",
                                   "reduction combines on the device",
                                   "alltoallv/w blocks staged",
                                   "alltoallv/w blocks typed",
                                   "alltoallv/w blocks as bytes in place"};
  return names[static_cast<int>(c)];
}

struct Counters {
  std::array<std::atomic<uint64_t>, static_cast<int>(Counter::count_)> values{};
  void add(Counter c, uint64_t n = 1) {
    if (config().report == 0) return;
    values[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t get(Counter c) const { return values[static_cast<int>(c)].load(std::memory_order_relaxed); }
};

// One process-wide set (constant-initialised: usable from any constructor).
extern Counters g_counters;
inline Counters& counters() { return g_counters; }

// Adds the time between construction and destruction to Counter::nanoseconds,
// only when the end-of-run report is on: reading the clock costs more than
// many of the calls it would time.
class ScopedTimer {
 public:
  ScopedTimer();
  ~ScopedTimer() {
    if (on_) stop();
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  void stop();
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace veneer
