// SPDX-License-Identifier: BSD-3-Clause
// Every reduction algorithm, forced one at a time, on every pretend node
// layout, for every op on every type it is defined on (user ops included),
// in place and not, count 0 and counts below and above the number of ranks,
// against the library's own result. Allreduce results must also be the same
// bits on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "algorithms/collectives.h"
#include "test/collectives/harness.h"

namespace veneer::test {
namespace {

std::vector<int> counts_to_try(int p) {
  std::set<int> counts{0, std::max(p - 1, 1), 2 * p + 3};
  // 9000 elements pass 32 KiB: the leaders' and lanes' allreduce switch to halving.
  if (!quick()) counts.insert({1, 1000, 9000});
  return {counts.begin(), counts.end()};
}

struct Sweep {
  Collective collective;
  int runs = 0;
  std::map<std::string, int> runs_per_algorithm;
};

// Elements each rank reduces, and receives, for a call with `count` (the rcounts for reduce_scatter).
int64_t input_count(Collective c, int count, const std::vector<int>& rcounts, int p) {
  if (c == Collective::reduce_scatter) return std::accumulate(rcounts.begin(), rcounts.end(), int64_t{0});
  if (c == Collective::reduce_scatter_block) return int64_t{count} * p;
  return count;
}
int64_t output_count(Collective c, int count, const std::vector<int>& rcounts, int rank) {
  if (c == Collective::reduce_scatter) return rcounts[static_cast<size_t>(rank)];
  return count;
}

int library(Collective c, const void* s, void* r, int count, const std::vector<int>& rcounts, MPI_Datatype t, MPI_Op op,
            int root) {
  switch (c) {
    case Collective::allreduce: return PMPI_Allreduce(s, r, count, t, op, MPI_COMM_WORLD);
    case Collective::reduce: return PMPI_Reduce(s, r, count, t, op, root, MPI_COMM_WORLD);
    case Collective::reduce_scatter: return PMPI_Reduce_scatter(s, r, rcounts.data(), t, op, MPI_COMM_WORLD);
    case Collective::reduce_scatter_block: return PMPI_Reduce_scatter_block(s, r, count, t, op, MPI_COMM_WORLD);
    default: return MPI_ERR_OTHER;
  }
}

void sweep(Collective c) {
  const int p = world_size(), rank = world_rank();
  auto lays = layouts();
  Failures failures;
  std::map<std::string, int> runs;
  uint32_t salt = 1;
  for (const TypeCase& tc : reduction_cases()) {
    const ElementType& t = tc.type;
    for (const OpCase& oc : tc.ops) {
      for (int count : counts_to_try(p)) {
        // Reduce_scatter: uneven counts with zeros, about `count` in all.
        std::vector<int> rcounts(static_cast<size_t>(p));
        for (int i = 0; i < p; ++i)
          rcounts[static_cast<size_t>(i)] = (count / p) + ((i * 3 + count) % 4 == 0 ? 0 : i % 3);
        if (c == Collective::reduce_scatter_block && count > 1000) continue;  // p blocks of count: enough at 1000
        const std::vector<int> roots = c == Collective::reduce ? std::vector<int>{0, p - 1} : std::vector<int>{0};
        for (int root : std::set<int>(roots.begin(), roots.end())) {
          for (bool in_place : {false, true}) {
            ++salt;
            const int64_t in_n = input_count(c, count, rcounts, p), out_n = output_count(c, count, rcounts, rank);
            auto input = buffer(in_n, t.extent);
            fill(t, input.data(), in_n, rank, oc.values, salt);
            auto reference = buffer(std::max(in_n, out_n), t.extent);
            ASSERT_EQ(library(c, input.data(), reference.data(), count, rcounts, t.type, oc.op, root), MPI_SUCCESS);
            std::vector<uint64_t> prints;
            for (const Layout& layout : lays) {
              for (const algorithms::Algorithm* a : algorithms::algorithms_for(c)) {
                // In place, the input is in the output buffer (root only, for Reduce).
                const bool here_in_place = in_place && (c != Collective::reduce || rank == root);
                auto output = buffer(std::max(in_n, out_n), t.extent);
                if (here_in_place) std::memcpy(output.data(), input.data(), static_cast<size_t>(in_n * t.extent));
                Call call;
                call.collective = c;
                call.sbuf = here_in_place ? MPI_IN_PLACE : input.data();
                call.rbuf = output.data();
                call.count = count;
                call.type = t.type;
                call.op = oc.op;
                call.root = root;
                call.rcounts = rcounts.data();
                std::string why;
                auto rc = algorithms::run_with(a->name, call, *layout.h, &why);
                const std::string what = std::string(algorithms::collective_name(c)) + " " + std::string(a->name) +
                                         " on " + layout.name + ", " + t.name + " " + oc.name + ", count " +
                                         std::to_string(count) + (in_place ? ", in place" : "") + ", root " +
                                         std::to_string(root);
                if (!rc) {
                  // Every case is a call Veneer takes (derived types included: their layouts are known)...
                  if (!algorithms::shape_of(call, *layout.h)) failures.add(what + ": not admitted: " + why);
                  // ...and only order-sensitive algorithms may refuse, and only non-commutative ops.
                  int commutative = 1;
                  PMPI_Op_commutative(oc.op, &commutative);
                  if (commutative && a->needs.order != algorithms::OpOrder::rank_order &&
                      !a->needs.equal_ranks_per_node)
                    failures.add(what + ": refused: " + why);
                  if (commutative && a->needs.equal_ranks_per_node && layout.h->equal_ranks_per_node)
                    failures.add(what + ": refused: " + why);
                  continue;
                }
                ++runs[std::string(a->name)];
                if (*rc != MPI_SUCCESS) {
                  failures.add(what + ": returned " + std::to_string(*rc));
                  continue;
                }
                if (c == Collective::reduce && rank != root) continue;
                std::string diff = compare(t, output.data(), reference.data(), out_n);
                if (!diff.empty()) failures.add(what + ": " + diff);
                if (c == Collective::allreduce) prints.push_back(fingerprint(packed(t.type, output.data(), out_n)));
              }
            }
            if (c == Collective::allreduce && !same_on_all_ranks(prints))
              failures.add(std::string("allreduce results are not the same bits on every rank: ") + t.name + " " +
                           oc.name + ", count " + std::to_string(count));
          }
        }
      }
    }
  }
  // Every algorithm ran (p == 1 included: each must handle a single rank).
  for (const algorithms::Algorithm* a : algorithms::algorithms_for(c))
    EXPECT_GT(runs[std::string(a->name)], 0) << a->name << " never ran";
}

TEST(Reductions, AllreduceMatchesTheLibrary) { sweep(Collective::allreduce); }
TEST(Reductions, ReduceMatchesTheLibrary) { sweep(Collective::reduce); }
TEST(Reductions, ReduceScatterMatchesTheLibrary) { sweep(Collective::reduce_scatter); }
TEST(Reductions, ReduceScatterBlockMatchesTheLibrary) { sweep(Collective::reduce_scatter_block); }

}  // namespace
}  // namespace veneer::test
