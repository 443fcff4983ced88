// SPDX-License-Identifier: BSD-3-Clause
// The report (calls per algorithm) and explain.
#include "algorithms/report.h"

#include <optional>
#include <string>

#include "algorithms/admission.h"
#include "algorithms/collectives.h"
#include "algorithms/select.h"
#include "algorithms/state.h"
#include "support/config.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {

CallCounts::CallCounts(std::span<const size_t> algorithms_per_collective) {
  first_.reserve(algorithms_per_collective.size() + 1);
  size_t total = 0;
  for (size_t n : algorithms_per_collective) {
    first_.push_back(total);
    total += n + 1;
  }
  first_.push_back(total);
  counts_ = std::make_unique<std::atomic<uint64_t>[]>(total);
}

size_t CallCounts::slots(size_t collective) const {
  return collective + 1 < first_.size() ? first_[collective + 1] - first_[collective] : 0;
}

void CallCounts::add(size_t collective, size_t slot) {
  if (slot < slots(collective)) counts_[first_[collective] + slot].fetch_add(1, std::memory_order_relaxed);
}

uint64_t CallCounts::calls(size_t collective, size_t slot) const {
  return slot < slots(collective) ? counts_[first_[collective] + slot].load(std::memory_order_relaxed) : 0;
}

void CallCounts::reset() {
  for (size_t i = 0; i < first_.back(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

namespace {

CallCounts& counts() {
  static CallCounts table = [] {
    std::vector<size_t> sizes;
    sizes.reserve(collective_count);
    for (int i = 0; i < collective_count; ++i) sizes.push_back(algorithms_for(static_cast<Collective>(i)).size());
    return CallCounts(sizes);
  }();
  return table;
}

size_t slot_of(const Algorithm* a) {
  if (!a) return 0;
  auto list = algorithms_for(a->collective);
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == a) return i + 1;
  return 0;
}

}  // namespace

void count_call(Collective c, const Algorithm* a) {
  // (The interposer counts taken / passed calls for the summary; these are per
  // algorithm.) Shared atomics cost every call: only while a report is wanted.
  if (config().report == 0) return;
  counts().add(static_cast<size_t>(c), slot_of(a));
}

std::vector<AlgorithmCount> collectives_counts() {
  std::vector<AlgorithmCount> out;
  for (int i = 0; i < collective_count; ++i) {
    const Collective c = static_cast<Collective>(i);
    auto list = algorithms_for(c);
    for (size_t k = 0; k <= list.size(); ++k) {
      const uint64_t n = counts().calls(static_cast<size_t>(i), k);
      if (n) out.push_back({c, k == 0 ? std::string_view("library") : list[k - 1]->name, n});
    }
  }
  return out;
}

void reset_collectives_counts() { counts().reset(); }

std::string collectives_report() {
  std::string out;
  std::optional<Collective> current;
  for (const AlgorithmCount& entry : collectives_counts()) {
    if (current != entry.collective) {
      if (current) out += "\n";
      out += "  ";
      out += collective_name(entry.collective);
      out += ":";
      current = entry.collective;
    } else {
      out += ",";
    }
    out += " ";
    out += entry.algorithm;
    out += " ";
    out += std::to_string(entry.calls);
  }
  if (!out.empty()) out.insert(0, "collectives (calls per algorithm):\n").append("\n");
  return out;
}

std::string explain(Collective c, int64_t bytes, MPI_Comm comm) {
  const Hierarchy* h = topology::hierarchy(comm);
  if (!h) return "not taken: no hierarchy for this communicator (intercommunicator?)\n";
  Shape s = shape_of(c, bytes, *h);
  s.count = is_reduction(c) ? bytes / 8 : bytes;  // as if doubles
  return explain(s, *current_tuning(), *current_model());
}

}  // namespace veneer::algorithms
