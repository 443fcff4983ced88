// SPDX-License-Identifier: BSD-3-Clause
// A leader or lane communicator the library fails to make: the algorithms
// that run on one (two_level, lanes, node_aware) return the library's error
// code on every rank, before any message, instead of running on
// MPI_COMM_NULL (issue 12, point 6). The failure is made here: this program
// defines PMPI_Comm_split, which Veneer's hierarchy calls, and fails it on
// request; otherwise it hands the call to the library's.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "test/collectives/harness.h"
#include "topology/hierarchy.h"

namespace {

std::atomic<bool> g_fail_splits{false};
constexpr int kSplitError = MPI_ERR_OTHER;

}  // namespace

extern "C" int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  if (g_fail_splits.load()) {
    *newcomm = MPI_COMM_NULL;
    return kSplitError;
  }
  using Split = int (*)(MPI_Comm, int, int, MPI_Comm*);
  static const auto library = reinterpret_cast<Split>(dlsym(RTLD_NEXT, "PMPI_Comm_split"));
  return library != nullptr ? library(comm, color, key, newcomm) : MPI_ERR_INTERN;
}

namespace veneer::test {
namespace {

namespace alg = veneer::algorithms;

struct Case {
  Collective collective;
  const char* algorithm;
};

// Two pretend nodes (the first and second half of the ranks), so the leaders'
// and lanes' communicators would carry messages.
std::unique_ptr<Hierarchy> two_nodes() {
  return topology::build_hierarchy(MPI_COMM_WORLD, world_rank() * 2 / world_size());
}

TEST(SplitFailure, AlgorithmsReturnTheLibrarysCode) {
  if (world_size() < 2) GTEST_SKIP() << "needs two pretend nodes";
  const int p = world_size();
  constexpr int count = 64;
  const Case cases[] = {{Collective::bcast, "two_level"},     {Collective::reduce, "two_level"},
                        {Collective::allreduce, "two_level"}, {Collective::allreduce, "lanes"},
                        {Collective::allgather, "two_level"}, {Collective::alltoall, "node_aware"}};
  for (const Case& c : cases) {
    std::unique_ptr<Hierarchy> h = two_nodes();
    ASSERT_TRUE(h);
    ASSERT_EQ(h->node_count, 2);
    // The duplicate and the node's communicator are made as usual (execution
    // makes them before an algorithm runs); only the algorithm's own split fails.
    ASSERT_NE(h->comm(), MPI_COMM_NULL);
    ASSERT_NE(h->node_comm(), MPI_COMM_NULL);
    std::vector<int> in(static_cast<size_t>(count * p), world_rank() + 1), out(static_cast<size_t>(count * p), -7);
    Call call;
    call.collective = c.collective;
    call.sbuf = in.data();
    call.rbuf = out.data();
    call.count = count;
    call.type = MPI_INT;
    call.scount = count;
    call.stype = MPI_INT;
    call.op = MPI_SUM;
    call.root = p - 1;  // not a leader: the root hands over to its node's leader
    if (c.collective == Collective::bcast) call.sbuf = nullptr;
    std::string why;
    g_fail_splits = true;
    const std::optional<int> rc = alg::run_with(c.algorithm, call, *h, &why);
    g_fail_splits = false;
    ASSERT_TRUE(rc) << c.algorithm << ": " << why;
    EXPECT_EQ(*rc, kSplitError) << "collective " << static_cast<int>(c.collective) << " " << c.algorithm;
    // Remembered: asked again, the communicator reports the same failure.
    int again = MPI_SUCCESS;
    const MPI_Comm made = std::string(c.algorithm) == "lanes" ? h->lanes(&again) : h->leaders(&again);
    EXPECT_EQ(made, MPI_COMM_NULL);
    EXPECT_EQ(again, kSplitError);
    // Nothing was sent: the job goes on with the same communicators.
    EXPECT_EQ(PMPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
  // With the split working again, the same algorithm runs and gives the library's answer.
  std::unique_ptr<Hierarchy> h = two_nodes();
  ASSERT_TRUE(h);
  std::vector<int> in(count, world_rank() + 1), out(count, 0), ref(count, 0);
  Call call;
  call.collective = Collective::allreduce;
  call.sbuf = in.data();
  call.rbuf = out.data();
  call.count = count;
  call.type = MPI_INT;
  call.op = MPI_SUM;
  std::string why;
  const std::optional<int> rc = alg::run_with("two_level", call, *h, &why);
  ASSERT_TRUE(rc) << why;
  EXPECT_EQ(*rc, MPI_SUCCESS);
  ASSERT_EQ(PMPI_Allreduce(in.data(), ref.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(out, ref);
}

}  // namespace
}  // namespace veneer::test
