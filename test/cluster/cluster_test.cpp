// SPDX-License-Identifier: BSD-3-Clause
// On a cluster of pretend hosts (test/cluster/netns_cluster.sh sets
// VENEER_CLUSTER_HOSTS to its layout, e.g. "2,1"): the node hierarchy Veneer
// detects is the hosts, not pretended; and every collective algorithm, forced
// through the environment and called through the MPI entry points, gives the
// library's result on those real nodes; typed sends go to the library when
// no profile decides them. Outside such a cluster the tests skip.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "algorithms/collectives.h"
#include "support/config.h"
#include "support/counters.h"
#include "topology/hierarchy.h"
#include "topology/peer_level.h"

namespace veneer::test {
namespace {

// The per-algorithm counts are kept only while a report is wanted; Veneer
// reads the environment again at MPI_Init, which runs after this.
const bool g_report_on = [] { return setenv("VENEER_REPORT", "1", 1) == 0; }();

namespace alg = veneer::algorithms;
using alg::Collective;

int world_rank() {
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int p = 0;
  PMPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// The layout the cluster was started with (ranks per host, host I is "nodeI"); empty off the cluster.
std::vector<int> cluster_layout() {
  const char* text = std::getenv("VENEER_CLUSTER_HOSTS");
  std::vector<int> out;
  if (!text) return out;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p || v < 1) return {};
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

// Every rank's hostname, in rank order.
std::vector<std::string> hostnames() {
  constexpr int n = 64;
  char mine[n] = {};
  gethostname(mine, n - 1);
  std::vector<char> all(static_cast<size_t>(n * world_size()));
  PMPI_Allgather(mine, n, MPI_CHAR, all.data(), n, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < world_size(); ++r) out.emplace_back(&all[static_cast<size_t>(r * n)]);
  return out;
}

#define SKIP_OFF_CLUSTER()                                                             \
  do {                                                                                 \
    if (cluster_layout().empty()) GTEST_SKIP() << "not on a netns_cluster.sh cluster"; \
  } while (0)

TEST(Cluster, DetectedNodesAreTheHosts) {
  SKIP_OFF_CLUSTER();
  const std::vector<int> layout = cluster_layout();
  ASSERT_FALSE(topology::pretend_node_sizes_from_env()) << "VENEER_RANKS_PER_NODE would pretend the nodes";
  ASSERT_EQ(std::accumulate(layout.begin(), layout.end(), 0), world_size()) << "ranks do not fill the layout";
  const topology::Hierarchy* h = topology::hierarchy(MPI_COMM_WORLD);
  ASSERT_NE(h, nullptr);
  EXPECT_FALSE(h->pretend);
  if (world_rank() == 0) std::printf("detected: %s\n", h->describe().c_str());
  const auto hosts = hostnames();
  ASSERT_EQ(h->node_count, static_cast<int>(layout.size())) << h->describe();
  for (int r = 0; r < world_size(); ++r)
    for (int s = 0; s < world_size(); ++s)
      EXPECT_EQ(h->node_of_rank[static_cast<size_t>(r)] == h->node_of_rank[static_cast<size_t>(s)],
                hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(s)])
          << "ranks " << r << " (" << hosts[static_cast<size_t>(r)] << ") and " << s << " ("
          << hosts[static_cast<size_t>(s)] << ")";
  // The launcher fills the hosts in order, so node I (numbered by its lowest rank) is host nodeI.
  for (int node = 0; node < h->node_count; ++node) {
    EXPECT_EQ(h->node_size_of(node), layout[static_cast<size_t>(node)]) << "node " << node;
    const int first = h->node_ranks[static_cast<size_t>(node)].front();
    EXPECT_EQ(hosts[static_cast<size_t>(first)], "node" + std::to_string(node));
  }
  bool equal = true;
  for (int n : layout) equal = equal && n == layout.front();
  EXPECT_EQ(h->equal_ranks_per_node, equal);
  EXPECT_TRUE(h->node_consecutive);
  EXPECT_EQ(h->node_size, layout[static_cast<size_t>(h->node_index)]);
}

const char* variable_of(Collective c) {
  switch (c) {
    case Collective::allreduce: return "VENEER_ALLREDUCE";
    case Collective::bcast: return "VENEER_BCAST";
    case Collective::reduce: return "VENEER_REDUCE";
    case Collective::allgather: return "VENEER_ALLGATHER";
    case Collective::reduce_scatter: return "VENEER_REDUCE_SCATTER";
    case Collective::reduce_scatter_block: return "VENEER_REDUCE_SCATTER_BLOCK";
    case Collective::alltoall: return "VENEER_ALLTOALL";
  }
  return "";
}

// Forces `choice` for every size of collective c while alive ("" = automatic).
struct Forced {
  std::string name;
  Forced(Collective c, const std::string& choice) : name(variable_of(c)) {
    if (choice.empty()) unsetenv(name.c_str());
    else setenv(name.c_str(), ("0-inf:" + choice).c_str(), 1);
    alg::collectives_init();
  }
  ~Forced() {
    unsetenv(name.c_str());
    alg::collectives_init();
  }
};

uint64_t calls(Collective c, std::string_view algorithm) {
  for (const auto& e : alg::collectives_counts())
    if (e.collective == c && e.algorithm == algorithm) return e.calls;
  return 0;
}

int value(int rank, int i, int salt) { return (rank + 1) * 1000 + (i * 7 + salt) % 977 - 400; }

// One call of collective c on MPI_COMM_WORLD with `count` ints (per block for
// the gathers; per rank for the scatters), through the MPI entry point when
// `library` is false and PMPI otherwise; returns the bytes this rank ends with.
std::vector<int> run(Collective c, int count, int root, bool in_place, int salt, bool library, int* rc) {
  const int p = world_size(), rank = world_rank();
  const size_t n = static_cast<size_t>(count), np = n * static_cast<size_t>(p);
  std::vector<int> in(np), out(np, -7);
  for (size_t i = 0; i < np; ++i) in[i] = value(rank, static_cast<int>(i), salt);
  std::vector<int> rcounts(static_cast<size_t>(p), count);
  const void* s = in.data();
  if (in_place) {
    out = in;
    s = MPI_IN_PLACE;
  }
  switch (c) {
    case Collective::allreduce:
      *rc = library ? PMPI_Allreduce(s, out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                    : MPI_Allreduce(s, out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      out.resize(n);
      break;
    case Collective::bcast:
      out = rank == root ? in : out;
      *rc = library ? PMPI_Bcast(out.data(), count, MPI_INT, root, MPI_COMM_WORLD)
                    : MPI_Bcast(out.data(), count, MPI_INT, root, MPI_COMM_WORLD);
      out.resize(n);
      break;
    case Collective::reduce:
      *rc = library ? PMPI_Reduce(in.data(), out.data(), count, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD)
                    : MPI_Reduce(in.data(), out.data(), count, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
      out.resize(rank == root ? n : 0);
      break;
    case Collective::allgather:
      // In place: my block is already where it belongs in the output.
      if (in_place) std::copy(in.begin(), in.begin() + static_cast<long>(n), out.begin() + static_cast<long>(n) * rank);
      *rc = library ? PMPI_Allgather(s, count, MPI_INT, out.data(), count, MPI_INT, MPI_COMM_WORLD)
                    : MPI_Allgather(s, count, MPI_INT, out.data(), count, MPI_INT, MPI_COMM_WORLD);
      break;
    case Collective::reduce_scatter:
      *rc = library ? PMPI_Reduce_scatter(s, out.data(), rcounts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                    : MPI_Reduce_scatter(s, out.data(), rcounts.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      out.resize(n);
      break;
    case Collective::reduce_scatter_block:
      *rc = library ? PMPI_Reduce_scatter_block(s, out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                    : MPI_Reduce_scatter_block(s, out.data(), count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      out.resize(n);
      break;
    case Collective::alltoall:
      *rc = library ? PMPI_Alltoall(s, count, MPI_INT, out.data(), count, MPI_INT, MPI_COMM_WORLD)
                    : MPI_Alltoall(s, count, MPI_INT, out.data(), count, MPI_INT, MPI_COMM_WORLD);
      break;
  }
  return out;
}

// Whether Veneer would run algorithm `a` for such a call (the same on every rank).
bool eligible_here(const alg::Algorithm& a, Collective c, int count, bool in_place, const topology::Hierarchy& h,
                   std::string* why) {
  const int p = world_size();
  std::vector<int> dummy(static_cast<size_t>(count) * static_cast<size_t>(p) + 1);
  std::vector<int> rcounts(static_cast<size_t>(p), count);
  alg::Call call;
  call.collective = c;
  call.sbuf = in_place ? MPI_IN_PLACE : dummy.data();
  call.rbuf = dummy.data();
  call.count = count;
  call.type = MPI_INT;
  call.scount = count;
  call.stype = MPI_INT;
  call.rcounts = rcounts.data();
  call.op = c == Collective::reduce ? MPI_MAX : MPI_SUM;
  auto shape = alg::shape_of(call, h);
  if (!shape) {
    *why = "Veneer does not take such a call";
    return false;
  }
  return alg::eligible(a, *shape, why);
}

TEST(Cluster, EveryAlgorithmOnTheDetectedNodes) {
  SKIP_OFF_CLUSTER();
  const int p = world_size(), rank = world_rank();
  const topology::Hierarchy* h = topology::hierarchy(MPI_COMM_WORLD);
  ASSERT_NE(h, nullptr);
  ASSERT_FALSE(h->pretend);
  // 40000 ints: 160 KiB per block, past the small-message switches, but quick on a 1 Gbit/s link.
  const std::vector<int> counts{1, 7, 1000, 40000};
  for (int ci = 0; ci < alg::collective_count; ++ci) {
    const auto c = static_cast<Collective>(ci);
    std::vector<std::string> choices{"", "library"};
    for (const alg::Algorithm* a : alg::algorithms_for(c)) choices.emplace_back(a->name);
    for (const std::string& choice : choices) {
      Forced forced(c, choice);
      const alg::Algorithm* a = choice.empty() || choice == "library" ? nullptr : alg::find_algorithm(c, choice);
      int ran = 0;
      std::string why_not;
      for (int count : counts) {
        if (c == Collective::alltoall && count > 1000 && p > 4) continue;
        for (bool in_place : {false, true}) {
          if (in_place && (c == Collective::bcast || c == Collective::reduce || c == Collective::alltoall)) continue;
          for (int root : std::vector<int>{0, p - 1}) {
            if (root != 0 && c != Collective::bcast && c != Collective::reduce) continue;
            const int salt = count + root * 3 + in_place;
            const std::string what =
                std::string(alg::collective_name(c)) + " forced " + (choice.empty() ? std::string("auto") : choice) +
                ", count " + std::to_string(count) + (in_place ? ", in place" : "") + ", root " + std::to_string(root);
            int rc_ref = MPI_SUCCESS, rc = MPI_SUCCESS;
            const auto expected = run(c, count, root, in_place, salt, true, &rc_ref);
            ASSERT_EQ(rc_ref, MPI_SUCCESS) << what;
            alg::reset_collectives_counts();
            const auto got = run(c, count, root, in_place, salt, false, &rc);
            ASSERT_EQ(rc, MPI_SUCCESS) << what;
            EXPECT_EQ(got, expected) << what << " on rank " << rank;
            if (a) {
              std::string why;
              const bool eligible = eligible_here(*a, c, count, in_place, *h, &why);
              EXPECT_EQ(calls(c, a->name), eligible ? 1u : 0u) << what << (eligible ? "" : ": " + why);
              ran += eligible;
              if (!eligible) why_not = why;
            } else if (choice == "library") {
              EXPECT_EQ(calls(c, "library"), 1u) << what;
            }
          }
        }
      }
      if (!a) continue;
      // Only the communicator's shape may keep an algorithm from running at all.
      const bool shape_bars = (a->needs.power_of_two && (p & (p - 1))) ||
                              (a->needs.equal_ranks_per_node && !h->equal_ranks_per_node) ||
                              (a->needs.node_consecutive && !h->node_consecutive);
      if (ran == 0 && rank == 0)
        std::printf("not eligible on %s: %s %s (%s)\n", h->describe().c_str(),
                    std::string(alg::collective_name(c)).c_str(), std::string(a->name).c_str(), why_not.c_str());
      EXPECT_TRUE(ran > 0 || shape_bars) << alg::collective_name(c) << " " << a->name << " never ran: " << why_not;
    }
  }
}

// Without a profile, the built-in send rule (measured on one host) holds in
// a job on one host only: across hosts, a ring of 128 KiB messages of
// 8-byte blocks, which it takes over on one host, goes to the library on both
// sides, to a peer on this host and to one on another alike, and arrives.
TEST(Cluster, TypedSendsGoToTheLibraryOnSeveralHostsWithoutAProfile) {
  SKIP_OFF_CLUSTER();
  if (config().send_rules || !config().p2p_one_host_only)
    GTEST_SKIP() << "a profile's tables or the user's thresholds decide the sends";
  ASSERT_EQ(topology::world_host_count(), static_cast<int>(cluster_layout().size()));
  const int n = world_size(), me = world_rank();
  constexpr int kElements = 16384;  // every other double of 2 * kElements
  MPI_Datatype every_other = MPI_DATATYPE_NULL;
  ASSERT_EQ(MPI_Type_vector(kElements, 1, 2, MPI_DOUBLE, &every_other), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&every_other), MPI_SUCCESS);
  std::vector<double> out(2 * kElements), in(2 * kElements, -1.0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = me * 1e6 + static_cast<double>(i);
  const uint64_t sent = counters().get(Counter::send_taken), received = counters().get(Counter::recv_taken);
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  MPI_Request r[2];
  ASSERT_EQ(MPI_Irecv(in.data(), 1, every_other, previous, 9, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Isend(out.data(), 1, every_other, next, 9, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(2, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  ASSERT_EQ(MPI_Sendrecv(out.data(), 1, every_other, next, 10, in.data(), 1, every_other, previous, 10, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE),
            MPI_SUCCESS);
  EXPECT_EQ(counters().get(Counter::send_taken), sent);
  EXPECT_EQ(counters().get(Counter::recv_taken), received);
  int wrong = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != (i % 2 == 0 ? previous * 1e6 + static_cast<double>(i) : -1.0)) ++wrong;
  EXPECT_EQ(wrong, 0);
  MPI_Type_free(&every_other);
}

}  // namespace
}  // namespace veneer::test
