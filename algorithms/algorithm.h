// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// What an algorithm is: the collective it implements, its preconditions as
// data, its predicted time, and how it runs. One file per algorithm defines
// one `Algorithm`; registry.cpp lists them all.
#include <mpi.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/cost_model.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {

using topology::Hierarchy;

enum class Collective : int { allreduce, bcast, reduce, allgather, reduce_scatter, reduce_scatter_block, alltoall };
inline constexpr int collective_count = 7;

std::string_view collective_name(Collective c);
std::optional<Collective> collective_from_name(std::string_view name);

// In which order an algorithm combines the operands of a reduction.
enum class OpOrder {
  rank_order,  // a0 op a1 op ... op a(p-1), any bracketing: fine for non-commutative ops
  node_order,  // rank order when nodes are runs of consecutive ranks; otherwise needs a commutative op
  any_order,   // needs a commutative op
};

// Preconditions, checked against a Shape by eligible(). Defaults: no condition.
struct Requirements {
  OpOrder order = OpOrder::rank_order;
  bool predefined_op = false;    // MPI_SUM etc., not a user function
  bool predefined_type = false;  // a named MPI type
  bool power_of_two = false;     // communicator size 2^k
  bool equal_ranks_per_node = false;
  bool node_consecutive = false;
  bool in_place = true;              // accepts MPI_IN_PLACE
  bool count_at_least_p = false;     // at least one element per rank
  bool node_data_at_leader = false;  // a node's whole data meets at its leader: bytes x ranks per node < 2 GiB
  // Chosen by the model only where each rank's block to each other rank
  // (alltoall: bytes / ranks) is at most this; 0: any size. A rule naming
  // the algorithm alone still runs it above (offered() below).
  int64_t chosen_max_block = 0;
};

// A call as every rank sees it: only arguments MPI requires to be identical
// on all ranks (counts, type, op, communicator), so every rank selects alike.
struct Shape {
  Collective collective = Collective::allreduce;
  int64_t bytes = 0;  // the whole message; see tuning.h for what that is per collective
  int64_t count = 0;  // elements of the reduced vector (reductions), bytes otherwise
  int ranks = 1;
  int nodes = 1;
  int min_ranks_per_node = 1;
  int max_ranks_per_node = 1;
  bool equal_ranks_per_node = true;
  bool node_consecutive = true;
  bool commutative = true;
  bool predefined_op = true;
  bool predefined_type = true;
  bool in_place = false;
  bool oversubscribed = false;  // more ranks on the real node than it has PUs
  // Bcast and reduce: the root differs from the previous such call's on the
  // communicator (an application rotating its root: panel broadcasts,
  // pivots); the model scores candidates by their moving-root times.
  bool moving_root = false;
  // The first such call on the communicator since an MPI_Barrier there (the
  // pattern OSU's benchmarks time, and code that synchronises before a
  // phase); scored by the times of one call between barriers. A moved root
  // takes precedence.
  bool after_barrier = false;
};

Shape shape_of(Collective c, int64_t bytes, const Hierarchy& h);

// The arguments of a call, as the MPI function received them. Bcast, Allgather
// and Alltoall algorithms see bytes: `type` is MPI_BYTE and counts are bytes
// (collectives.cpp packs and unpacks other types around them).
struct Args {
  const void* sbuf = nullptr;
  void* rbuf = nullptr;
  int count = 0;  // reductions: elements; bcast: buffer; allgather/alltoall: per-rank block
  MPI_Datatype type = MPI_DATATYPE_NULL;
  const int* rcounts = nullptr;  // reduce_scatter: elements each rank receives
  MPI_Op op = MPI_OP_NULL;
  int root = 0;
};

// Written with designated initialisers, one per algorithm file:
//   extern const Algorithm bcast_binomial_algorithm{.collective = Collective::bcast, .name = "binomial", ...};
// and listed once in registry.cpp.
struct Algorithm {
  Collective collective = Collective::allreduce;
  std::string_view name;  // what users write in overrides and read in reports
  Requirements needs{};
  bool hierarchical = false;  // uses the node structure (the library's own estimate ignores these)
  double (*predicted_seconds)(const Shape&, const CostModel&) = nullptr;
  int (*run)(const Args&, const Hierarchy&) = nullptr;  // MPI error code
};

// Every algorithm of collective `c`.
std::span<const Algorithm* const> algorithms_for(Collective c);
const Algorithm* find_algorithm(Collective c, std::string_view name);

// Whether `a` may run a call of this shape; if not, `why_not` says which condition failed.
bool eligible(const Algorithm& a, const Shape& s, std::string* why_not = nullptr);
// Eligible, and within what the model may choose it for (chosen_max_block):
// what the model, the agreement of rank counts and the challengers consider.
bool offered(const Algorithm& a, const Shape& s, std::string* why_not = nullptr);

}  // namespace veneer::algorithms
