// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What ran: calls per collective and algorithm (the end-of-run report;
// collectives_counts() in collectives.h gives them as data).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/algorithm.h"

namespace veneer::algorithms {

// One counter per (collective, slot): slot 0 is the library, slot k the k-th
// algorithm of the collective's list. Each row is as long as its list,
// however many algorithms a collective has.
class CallCounts {
 public:
  explicit CallCounts(std::span<const size_t> algorithms_per_collective);
  void add(size_t collective, size_t slot);              // out of range: ignored
  uint64_t calls(size_t collective, size_t slot) const;  // 0 out of range
  size_t slots(size_t collective) const;                 // algorithms + 1 (the library); 0 out of range
  void reset();

 private:
  std::vector<size_t> first_;  // where each row starts; one more entry: the total
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
};

// Counts a call of `c` that `a` ran (nullptr: the library), while a report is wanted.
void count_call(Collective c, const Algorithm* a);

}  // namespace veneer::algorithms
