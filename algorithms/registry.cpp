// Every algorithm, per collective, and the precondition check.
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

constexpr std::array<const Algorithm*, 5> allreduce_list{&allreduce_recursive_doubling_algorithm,
                                                         &allreduce_rabenseifner_algorithm, &allreduce_ring_algorithm,
                                                         &allreduce_two_level_algorithm, &allreduce_lanes_algorithm};
constexpr std::array<const Algorithm*, 3> bcast_list{&bcast_binomial_algorithm, &bcast_scatter_allgather_algorithm,
                                                     &bcast_two_level_algorithm};
constexpr std::array<const Algorithm*, 3> reduce_list{
    &reduce_binomial_algorithm, &reduce_reduce_scatter_gather_algorithm, &reduce_two_level_algorithm};
constexpr std::array<const Algorithm*, 4> allgather_list{&allgather_recursive_doubling_algorithm,
                                                         &allgather_bruck_algorithm, &allgather_ring_algorithm,
                                                         &allgather_two_level_algorithm};
constexpr std::array<const Algorithm*, 2> reduce_scatter_list{&reduce_scatter_recursive_halving_algorithm,
                                                              &reduce_scatter_pairwise_algorithm};
constexpr std::array<const Algorithm*, 2> reduce_scatter_block_list{&reduce_scatter_block_recursive_halving_algorithm,
                                                                    &reduce_scatter_block_pairwise_algorithm};
constexpr std::array<const Algorithm*, 3> alltoall_list{&alltoall_bruck_algorithm, &alltoall_pairwise_algorithm,
                                                        &alltoall_node_aware_algorithm};

constexpr std::array<std::string_view, collective_count> names{
    "allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "reduce_scatter_block", "alltoall"};

}  // namespace

std::string_view collective_name(Collective c) { return names[static_cast<size_t>(c)]; }

std::optional<Collective> collective_from_name(std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Collective>(i);
  return std::nullopt;
}

std::span<const Algorithm* const> algorithms_for(Collective c) {
  switch (c) {
    case Collective::allreduce: return allreduce_list;
    case Collective::bcast: return bcast_list;
    case Collective::reduce: return reduce_list;
    case Collective::allgather: return allgather_list;
    case Collective::reduce_scatter: return reduce_scatter_list;
    case Collective::reduce_scatter_block: return reduce_scatter_block_list;
    case Collective::alltoall: return alltoall_list;
  }
  return {};
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

Shape shape_of(Collective c, int64_t bytes, const Hierarchy& h) {
  Shape s;
  s.collective = c;
  s.bytes = bytes;
  s.count = bytes;
  s.ranks = h.size;
  s.nodes = h.node_count;
  s.min_ranks_per_node = h.min_ranks_per_node;
  s.max_ranks_per_node = h.max_ranks_per_node;
  s.equal_ranks_per_node = h.equal_ranks_per_node;
  s.node_consecutive = h.node_consecutive;
  return s;
}

}  // namespace veneer::algorithms
