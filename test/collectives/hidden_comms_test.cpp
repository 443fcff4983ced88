// SPDX-License-Identifier: BSD-3-Clause
// Veneer makes no communicator of its own unless one of its algorithms is
// chosen for that communicator (issue 11, "hidden communicators"): where the
// library serves every collective, the job's sequence of communicators is the
// library's own. Checked two ways, through the MPI_* entry points:
// - Veneer's count of the communicators it made (topology::communicators_created);
// - what the library hands out next: a communicator made and freed just
//   before the collectives gets the same Fortran handle (Open MPI: the index
//   in its table, lowest free first; MPICH: the handle, reused from its pool)
//   as one made just after them, unless something else took that place.
//   The forced case checks that this probe does see Veneer's duplicate.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "support/config.h"
#include "test/collectives/harness.h"
#include "topology/hierarchy.h"

namespace veneer::test {
namespace {

namespace alg = veneer::algorithms;
using topology::communicators_created;

// The handle the library gives the next communicator made on this rank.
MPI_Fint next_communicator() {
  MPI_Comm c = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &c);
  const MPI_Fint f = PMPI_Comm_c2f(c);
  PMPI_Comm_free(&c);
  return f;
}

// Sets the environment for the collectives (rules, switches) and makes Veneer read it again.
class Environment {
 public:
  using Vars = std::vector<std::pair<std::string, std::string>>;
  explicit Environment(Vars vars) : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) setenv(name.c_str(), value.c_str(), 1);
    reread();
  }
  ~Environment() {
    for (const auto& [name, value] : vars_) unsetenv(name.c_str());
    reread();
  }

 private:
  static void reread() {
    reload_config();
    alg::collectives_init();
  }
  Vars vars_;
};

// Runs one call of each collective Veneer takes on comm, with `count` ints,
// through the MPI_* entry points; every result is checked against the library.
void run_collectives(MPI_Comm comm, int count) {
  int p = 0, rank = 0;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &rank);
  const size_t n = static_cast<size_t>(count), all = n * static_cast<size_t>(p);
  std::vector<int> in(all), out(all, -1), ref(all, -2);
  std::iota(in.begin(), in.end(), 1000 * rank);

  MPI_Allreduce(in.data(), out.data(), count, MPI_INT, MPI_SUM, comm);
  PMPI_Allreduce(in.data(), ref.data(), count, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(std::vector<int>(out.begin(), out.begin() + count), std::vector<int>(ref.begin(), ref.begin() + count))
      << "allreduce " << count;

  std::vector<int> b(in.begin(), in.begin() + count), bref = b;
  MPI_Bcast(b.data(), count, MPI_INT, p - 1, comm);
  PMPI_Bcast(bref.data(), count, MPI_INT, p - 1, comm);
  EXPECT_EQ(b, bref) << "bcast " << count;

  std::fill(out.begin(), out.end(), -1);
  std::fill(ref.begin(), ref.end(), -2);
  MPI_Reduce(in.data(), out.data(), count, MPI_INT, MPI_MAX, 0, comm);
  PMPI_Reduce(in.data(), ref.data(), count, MPI_INT, MPI_MAX, 0, comm);
  if (rank == 0)
    EXPECT_EQ(std::vector<int>(out.begin(), out.begin() + count), std::vector<int>(ref.begin(), ref.begin() + count))
        << "reduce " << count;

  MPI_Allgather(in.data(), count, MPI_INT, out.data(), count, MPI_INT, comm);
  PMPI_Allgather(in.data(), count, MPI_INT, ref.data(), count, MPI_INT, comm);
  EXPECT_EQ(out, ref) << "allgather " << count;

  MPI_Alltoall(in.data(), count, MPI_INT, out.data(), count, MPI_INT, comm);
  PMPI_Alltoall(in.data(), count, MPI_INT, ref.data(), count, MPI_INT, comm);
  EXPECT_EQ(out, ref) << "alltoall " << count;

  std::vector<int> mine(n, -1), mine_ref(n, -2);
  MPI_Reduce_scatter_block(in.data(), mine.data(), count, MPI_INT, MPI_SUM, comm);
  PMPI_Reduce_scatter_block(in.data(), mine_ref.data(), count, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(mine, mine_ref) << "reduce_scatter_block " << count;
}

// The counts (ints) at which the built-in defaults leave every collective to
// the library on this communicator's shape, as the selector says.
std::vector<int> counts_the_library_serves(MPI_Comm comm) {
  auto h = topology::build_hierarchy(comm);
  if (!h) return {};
  EXPECT_EQ(h->communicators_made(), 0);
  std::vector<int> counts;
  std::vector<int> buffer(1 << 18);
  for (int count : {1, 7, 100, 1000, 10000}) {
    bool library = true;
    for (Collective c : {Collective::allreduce, Collective::bcast, Collective::reduce, Collective::allgather,
                         Collective::alltoall, Collective::reduce_scatter_block}) {
      alg::Call call{.collective = c,
                     .sbuf = buffer.data(),
                     .rbuf = buffer.data(),
                     .count = count,
                     .type = MPI_INT,
                     .scount = count,
                     .stype = MPI_INT,
                     .op = MPI_SUM};
      library = library && alg::chosen_for(call, *h) == "library";
    }
    if (library) counts.push_back(count);
  }
  return counts;
}

TEST(HiddenCommunicators, LearningTheLayoutMakesNone) {
  const int64_t before = communicators_created();
  const MPI_Fint next = next_communicator();
  auto h = topology::build_hierarchy(MPI_COMM_WORLD);
  ASSERT_TRUE(h);
  EXPECT_EQ(communicators_created(), before);
  EXPECT_EQ(h->communicators_made(), 0);
  EXPECT_EQ(next_communicator(), next);
}

// Built-in defaults (no profile): wherever they give every collective to the
// library, running them makes no communicator and leaves the library's next one where it was.
TEST(HiddenCommunicators, NoneWhereTheDefaultsChooseTheLibrary) {
  MPI_Comm comm = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::vector<int> counts = counts_the_library_serves(comm);
  int p = 0;
  PMPI_Comm_size(comm, &p);
  if (p < 2) GTEST_SKIP() << "Veneer takes no collective on one rank";
  ASSERT_FALSE(counts.empty()) << "the defaults choose Veneer's algorithms at every count tried";
  const int64_t before = communicators_created();
  const MPI_Fint next = next_communicator();
  for (int round = 0; round < 3; ++round)
    for (int count : counts) run_collectives(comm, count);
  EXPECT_EQ(communicators_created(), before);
  EXPECT_EQ(next_communicator(), next);
  PMPI_Comm_free(&comm);
}

// VENEER_COLLECTIVES=0: every collective at every size goes to the library; nothing is made.
TEST(HiddenCommunicators, NoneWithCollectivesOff) {
  Environment off(Environment::Vars{{"VENEER_COLLECTIVES", "0"}});
  MPI_Comm comm = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int64_t before = communicators_created();
  const MPI_Fint next = next_communicator();
  for (int count : {1, 100, 10000, 100000}) run_collectives(comm, count);
  EXPECT_EQ(communicators_created(), before);
  EXPECT_EQ(next_communicator(), next);
  PMPI_Comm_free(&comm);
}

// Rules that give every size to the library: nothing made either (not even the layout is learnt).
TEST(HiddenCommunicators, NoneWhenRulesGiveEverythingToTheLibrary) {
  Environment::Vars vars;
  for (const char* name : {"VENEER_ALLREDUCE", "VENEER_BCAST", "VENEER_REDUCE", "VENEER_ALLGATHER", "VENEER_ALLTOALL",
                           "VENEER_REDUCE_SCATTER"})
    vars.emplace_back(name, "0-inf:library");
  Environment library(vars);
  MPI_Comm comm = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int64_t before = communicators_created();
  const MPI_Fint next = next_communicator();
  for (int count : {1, 100, 10000}) run_collectives(comm, count);
  EXPECT_EQ(communicators_created(), before);
  EXPECT_EQ(next_communicator(), next);
  PMPI_Comm_free(&comm);
}

// A chosen algorithm makes what it runs on, once per communicator: a flat one
// the duplicate, a hierarchical one the node's communicator (and the leaders'
// where it uses them) besides; all are freed with the user's communicator.
TEST(HiddenCommunicators, MadeOnceWhereAnAlgorithmIsChosen) {
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p < 2) GTEST_SKIP() << "Veneer takes no collective on one rank";
  Environment forced(Environment::Vars{
      {"VENEER_ALLREDUCE", "0-inf:ring"}, {"VENEER_BCAST", "0-inf:two_level"}, {"VENEER_RANKS_PER_NODE", "2"}});
  MPI_Comm comm = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int live = topology::live_hierarchies();
  const int64_t before = communicators_created();
  const MPI_Fint next = next_communicator();

  std::vector<int> in(64, 3 + p), out(64, 0), ref(64, 1);
  MPI_Allreduce(in.data(), out.data(), 64, MPI_INT, MPI_SUM, comm);
  PMPI_Allreduce(in.data(), ref.data(), 64, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(communicators_created(), before + 1);  // ring: the duplicate
  EXPECT_NE(next_communicator(), next);            // the probe sees it
  MPI_Allreduce(in.data(), out.data(), 64, MPI_INT, MPI_SUM, comm);
  EXPECT_EQ(communicators_created(), before + 1);  // made once

  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  std::vector<int> b(100, rank == 0 ? 42 : -1);
  MPI_Bcast(b.data(), 100, MPI_INT, 0, comm);
  EXPECT_EQ(b, std::vector<int>(100, 42));
  const int64_t after_two_level = communicators_created();
  EXPECT_EQ(after_two_level, before + 3);  // two_level: the node's communicator and the leaders'
  MPI_Bcast(b.data(), 100, MPI_INT, 0, comm);
  EXPECT_EQ(communicators_created(), after_two_level);

  EXPECT_EQ(topology::live_hierarchies(), live + 1);
  PMPI_Comm_free(&comm);
  EXPECT_EQ(topology::live_hierarchies(), live);  // and with it everything Veneer made for it
}

}  // namespace
}  // namespace veneer::test
