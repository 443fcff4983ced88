// SPDX-License-Identifier: BSD-3-Clause
// Every algorithm, per collective, and the precondition check.
#include <algorithm>
#include <array>
#include <climits>

#include "algorithms/algorithm.h"

namespace veneer::algorithms {

extern const Algorithm allreduce_recursive_doubling_algorithm, allreduce_rabenseifner_algorithm,
    allreduce_ring_algorithm, allreduce_two_level_algorithm, allreduce_lanes_algorithm;
extern const Algorithm bcast_binomial_algorithm, bcast_scatter_allgather_algorithm, bcast_two_level_algorithm;
extern const Algorithm reduce_binomial_algorithm, reduce_reduce_scatter_gather_algorithm, reduce_two_level_algorithm;
extern const Algorithm allgather_recursive_doubling_algorithm, allgather_bruck_algorithm, allgather_ring_algorithm,
    allgather_two_level_algorithm;
extern const Algorithm reduce_scatter_recursive_halving_algorithm, reduce_scatter_pairwise_algorithm;
extern const Algorithm reduce_scatter_block_recursive_halving_algorithm, reduce_scatter_block_pairwise_algorithm;
extern const Algorithm alltoall_bruck_algorithm, alltoall_pairwise_algorithm, alltoall_node_aware_algorithm;

namespace {

// Each collective's algorithms, in the order reports and explain list them.
// Adding one: its file defines `extern const Algorithm <collective>_<name>_algorithm{...}`,
// declared above and named once here; nothing is counted by hand.
constexpr auto allreduce_list = std::to_array<const Algorithm*>(
    {&allreduce_recursive_doubling_algorithm, &allreduce_rabenseifner_algorithm, &allreduce_ring_algorithm,
     &allreduce_two_level_algorithm, &allreduce_lanes_algorithm});
constexpr auto bcast_list = std::to_array<const Algorithm*>(
    {&bcast_binomial_algorithm, &bcast_scatter_allgather_algorithm, &bcast_two_level_algorithm});
constexpr auto reduce_list = std::to_array<const Algorithm*>(
    {&reduce_binomial_algorithm, &reduce_reduce_scatter_gather_algorithm, &reduce_two_level_algorithm});
constexpr auto allgather_list =
    std::to_array<const Algorithm*>({&allgather_recursive_doubling_algorithm, &allgather_bruck_algorithm,
                                     &allgather_ring_algorithm, &allgather_two_level_algorithm});
constexpr auto reduce_scatter_list =
    std::to_array<const Algorithm*>({&reduce_scatter_recursive_halving_algorithm, &reduce_scatter_pairwise_algorithm});
constexpr auto reduce_scatter_block_list = std::to_array<const Algorithm*>(
    {&reduce_scatter_block_recursive_halving_algorithm, &reduce_scatter_block_pairwise_algorithm});
constexpr auto alltoall_list = std::to_array<const Algorithm*>(
    {&alltoall_bruck_algorithm, &alltoall_pairwise_algorithm, &alltoall_node_aware_algorithm});

// Indexed by Collective.
constexpr auto lists =
    std::to_array<std::span<const Algorithm* const>>({allreduce_list, bcast_list, reduce_list, allgather_list,
                                                      reduce_scatter_list, reduce_scatter_block_list, alltoall_list});

constexpr auto names = std::to_array<std::string_view>(
    {"allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "reduce_scatter_block", "alltoall"});

// Every collective with at least one algorithm. (That none is listed twice or
// null is checked by the unit test, test/unit/registry_test.cpp: comparing the
// addresses of distinct objects is not a constant expression under the
// sanitizers' instrumentation. Each algorithm's own fields live in its file;
// the unit test also checks that every list holds only its collective's
// algorithms, under distinct names.)
constexpr bool none_empty() {
  return std::ranges::none_of(lists, [](std::span<const Algorithm* const> list) { return list.empty(); });
}
static_assert(lists.size() == collective_count && names.size() == collective_count);
static_assert(none_empty());

}  // namespace

std::string_view collective_name(Collective c) {
  const auto i = static_cast<size_t>(c);
  return i < names.size() ? names[i] : std::string_view("unknown");
}

std::optional<Collective> collective_from_name(std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Collective>(i);
  return std::nullopt;
}

std::span<const Algorithm* const> algorithms_for(Collective c) {
  const auto i = static_cast<size_t>(c);
  return i < lists.size() ? lists[i] : std::span<const Algorithm* const>{};
}

const Algorithm* find_algorithm(Collective c, std::string_view name) {
  for (const Algorithm* a : algorithms_for(c))
    if (a->name == name) return a;
  return nullptr;
}

bool eligible(const Algorithm& a, const Shape& s, std::string* why_not) {
  auto fail = [&](const char* why) {
    if (why_not) *why_not = why;
    return false;
  };
  const Requirements& n = a.needs;
  if (n.order == OpOrder::any_order && !s.commutative) return fail("needs a commutative op");
  if (n.order == OpOrder::node_order && !s.commutative && !s.node_consecutive)
    return fail("needs a commutative op or node-consecutive ranks");
  if (n.predefined_op && !s.predefined_op) return fail("needs a predefined op");
  if (n.predefined_type && !s.predefined_type) return fail("needs a predefined type");
  if (n.power_of_two && (s.ranks & (s.ranks - 1)) != 0) return fail("needs a power-of-two size");
  if (n.equal_ranks_per_node && !s.equal_ranks_per_node) return fail("needs equal ranks per node");
  if (n.node_consecutive && !s.node_consecutive) return fail("needs node-consecutive ranks");
  if (!n.in_place && s.in_place) return fail("does not take MPI_IN_PLACE");
  if (n.count_at_least_p && s.count < s.ranks) return fail("needs at least one element per rank");
  if (n.node_data_at_leader && s.bytes * s.max_ranks_per_node > INT_MAX)
    return fail("a node's data would exceed one message at its leader");
  return true;
}

bool offered(const Algorithm& a, const Shape& s, std::string* why_not) {
  if (!eligible(a, s, why_not)) return false;
  if (a.needs.chosen_max_block > 0 && s.bytes > a.needs.chosen_max_block * std::max(s.ranks, 1)) {
    if (why_not)
      *why_not = "not chosen above " + std::to_string(a.needs.chosen_max_block >> 10) +
                 " KiB a block (a rule naming it alone runs it)";
    return false;
  }
  return true;
}

}  // namespace veneer::algorithms
