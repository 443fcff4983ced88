// SPDX-License-Identifier: BSD-3-Clause
// Alltoallv/w and their neighbourhood forms, per block (interposer/alltoall.cpp):
// every call is made twice, through Veneer (MPI_*) and by the library
// (PMPI_*), on the same data, and the whole receive buffers (gaps included)
// must be equal. Veneer's counters (on with VENEER_REPORT=1) say which blocks
// it staged: exactly those whose type packs by the rule (mean block at most
// VENEER_ALLTOALL_MAX_BLOCK = 8 bytes here, not one run); which it handed over
// as bytes where they lie (one run of a type that is not contiguous; Alltoallw
// forms only); the others typed; and a call with neither passed through. Mixed blocks, zero counts,
// MPI_IN_PLACE, MPI_BOTTOM, Cartesian neighbourhoods with MPI_PROC_NULL
// neighbours, and distributed graphs with repeated neighbours.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "support/config.h"
#include "support/counters.h"
#include "test/mpi/ranks.h"

namespace {

using veneer::Counter;
using veneer::counters;

// Before MPI_Init reads them: counters on, the report thrown away, the rule
// at 8-byte blocks whatever this library's built-in default is.
const bool g_environment = [] {
  setenv("VENEER_REPORT", "1", 1);
  setenv("VENEER_REPORT_FILE", "/dev/null", 1);
  setenv("VENEER_PROFILE", "off", 1);
  setenv("VENEER_ALLTOALL_MAX_BLOCK", "8", 1);
  setenv("VENEER_ALLTOALL_MIN_BYTES", "0", 1);
  return true;
}();

class Type {
 public:
  Type() = default;
  explicit Type(MPI_Datatype t) : t_(t) { MPI_Type_commit(&t_); }
  ~Type() {
    if (t_ != MPI_DATATYPE_NULL) MPI_Type_free(&t_);
  }
  Type(const Type&) = delete;
  Type& operator=(const Type&) = delete;
  MPI_Datatype get() const { return t_; }

 private:
  MPI_Datatype t_ = MPI_DATATYPE_NULL;
};

MPI_Datatype vector(int n, int block, int stride) {
  MPI_Datatype t;
  MPI_Type_vector(n, block, stride, MPI_DOUBLE, &t);
  return t;
}

// A block kind: what one rank sends to another and how the other receives
// it. Both carry 8 doubles (kind 3: nothing), in different layouts; `packs`
// says whether the rule stages that side's block (mean block at most 8 B,
// not one run), `run` whether it is one run of a non-contiguous type.
struct Kind {
  MPI_Datatype send, recv;
  int send_count, recv_count;
  bool send_packs, recv_packs;
  bool send_run = false;
};
constexpr int kKinds = 6;

class Kinds {
 public:
  Kinds()
      : strided_(vector(8, 1, 2)),
        runs_(vector(2, 4, 6)),
        column_(vector(4, 1, 3)),
        one_run_([] {
          MPI_Datatype t;
          const int sizes[2] = {4, 8}, sub[2] = {1, 8}, starts[2] = {1, 0};
          MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
          return t;
        }()),
        scattered_([] {
          MPI_Datatype t, r;
          const int lengths[4] = {1, 1, 1, 1}, displs[4] = {0, 2, 4, 7};
          MPI_Type_indexed(4, lengths, displs, MPI_DOUBLE, &t);
          MPI_Type_create_resized(t, 0, 8 * 8, &r);
          MPI_Type_free(&t);
          return r;
        }()),
        spaced_([] {
          MPI_Datatype t;
          MPI_Type_create_hvector(8, 1, 24, MPI_DOUBLE, &t);
          return t;
        }()),
        wide_runs_(vector(2, 4, 5)) {
    kinds_[0] = {strided_.get(), MPI_DOUBLE, 1, 8, true, false};
    kinds_[1] = {runs_.get(), column_.get(), 1, 2, false, true};
    kinds_[2] = {MPI_DOUBLE, scattered_.get(), 8, 2, false, true};
    kinds_[3] = {strided_.get(), column_.get(), 0, 0, false, false};
    kinds_[4] = {one_run_.get(), strided_.get(), 1, 1, false, true, true};
    kinds_[5] = {spaced_.get(), wide_runs_.get(), 1, 1, true, false};
  }
  const Kind& operator[](int k) const { return kinds_[static_cast<size_t>(k % kKinds)]; }

 private:
  Type strided_, runs_, column_, one_run_, scattered_, spaced_, wide_runs_;
  std::array<Kind, kKinds> kinds_{};
};

// Doubles per peer's slot in the buffers (every kind's extent fits).
constexpr int kSlot = 64;

std::vector<double> pattern(size_t n, int salt) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank_of() * 1.0e6 + salt * 1.0e4 + static_cast<double>(i);
  return v;
}

// Veneer's counters across one call on this rank.
class Counted {
 public:
  Counted() { at(values_); }
  uint64_t taken() const { return delta(0); }
  uint64_t passed() const { return delta(1); }
  uint64_t staged() const { return delta(2); }
  uint64_t typed() const { return delta(3); }
  uint64_t runs() const { return delta(4); }

 private:
  static void at(std::array<uint64_t, 5>& v) {
    v = {counters().get(Counter::alltoall_taken), counters().get(Counter::alltoall_passed),
         counters().get(Counter::alltoall_blocks_staged), counters().get(Counter::alltoall_blocks_typed),
         counters().get(Counter::alltoall_blocks_runs)};
  }
  uint64_t delta(size_t i) const {
    std::array<uint64_t, 5> now{};
    at(now);
    return now[i] - values_[i];
  }
  std::array<uint64_t, 5> values_{};
};

// The expected decisions of one call: blocks staged by the rule, runs, and moving blocks.
struct Expected {
  uint64_t staged = 0, runs = 0, moving = 0;
  void add(int count, bool packs, bool run = false) {
    moving += count > 0;
    staged += count > 0 && packs;
    runs += count > 0 && run;
  }
  bool taken() const { return staged > 0; }  // runs alone do not make a call worth taking
};

// Alltoallw on MPI_COMM_WORLD: pair (a, b) uses kind (a + b + salt); a sends
// with the kind's send type, b receives with its receive type. Each block
// sits in its own slot of the buffers.
void check_alltoallw(int salt, bool in_place) {
  const Kinds kinds;
  const int p = size_of(), me = rank_of();
  const auto n = static_cast<size_t>(p);
  std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
  std::vector<MPI_Datatype> stypes(n), rtypes(n);
  Expected expect;
  for (int j = 0; j < p; ++j) {
    const Kind& k = kinds[me + j + salt];
    const auto i = static_cast<size_t>(j);
    sdispls[i] = rdispls[i] = j * kSlot * 8;
    scounts[i] = k.send_count;
    stypes[i] = k.send;
    if (in_place) {
      // Sent from and received into the same block: one type on both ends
      // of a pair, different layouts by rank parity (same 8 doubles).
      const bool odd = me % 2;
      rcounts[i] = odd ? k.recv_count : k.send_count;
      rtypes[i] = odd ? k.recv : k.send;
      expect.add(rcounts[i], odd ? k.recv_packs : k.send_packs, !odd && k.send_run);
    } else {
      rcounts[i] = k.recv_count;
      rtypes[i] = k.recv;
      expect.add(scounts[i], k.send_packs, k.send_run);
      expect.add(rcounts[i], k.recv_packs);
    }
  }
  // In place, every rank receives with its own parity's layouts: the pair's
  // two ends must agree on the element count, which they do (8 or 0 doubles).
  const std::vector<double> src = pattern(n * kSlot, salt);
  std::vector<double> out = in_place ? pattern(n * kSlot, salt + 1) : std::vector<double>(n * kSlot, -1.0);
  std::vector<double> ref = out;
  const void* sbuf = in_place ? MPI_IN_PLACE : src.data();
  Counted c;
  ASSERT_EQ(MPI_Alltoallw(sbuf, scounts.data(), sdispls.data(), stypes.data(), out.data(), rcounts.data(),
                          rdispls.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  ASSERT_EQ(PMPI_Alltoallw(sbuf, scounts.data(), sdispls.data(), stypes.data(), ref.data(), rcounts.data(),
                           rdispls.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(out, ref) << "salt " << salt;
  // With int displacements the typed blocks and runs may lie out of reach
  // of the staging buffer: then the whole side is staged, so more blocks may
  // be staged than the rule alone would (an allocator that spreads buffers
  // more than 2 GiB apart does this: AddressSanitizer's).
  EXPECT_EQ(c.taken(), expect.taken() ? 1u : 0u);
  EXPECT_EQ(c.passed(), expect.taken() ? 0u : 1u);
  EXPECT_GE(c.staged(), expect.staged);
  if (expect.taken()) {
    EXPECT_GE(c.staged() + c.runs(), expect.staged + expect.runs);
  } else {
    EXPECT_EQ(c.staged() + c.runs(), 0u);
  }
  EXPECT_EQ(c.staged() + c.runs() + c.typed(), expect.taken() ? expect.moving : 0);
}

TEST(AlltoallPerBlock, AlltoallwMixesStagedAndTypedBlocks) {
  for (int salt = 0; salt < kKinds; ++salt) check_alltoallw(salt, false);
}

TEST(AlltoallPerBlock, AlltoallwInPlace) {
  for (int salt = 0; salt < kKinds; ++salt) check_alltoallw(salt, true);
}

// No block worth packing nor one run (runs of 32 B, contiguous types, zero
// counts): the call goes to the library untouched; the same call again is
// recognised without a scan, with the same answer.
TEST(AlltoallPerBlock, AlltoallwWithNothingToPackPassesThrough) {
  const Kinds kinds;
  Type contiguous8([] {
    MPI_Datatype t;
    MPI_Type_contiguous(8, MPI_DOUBLE, &t);
    return t;
  }());
  const int p = size_of(), me = rank_of();
  const auto n = static_cast<size_t>(p);
  std::vector<int> counts(n), displs(n);
  std::vector<MPI_Datatype> stypes(n), rtypes(n);
  for (int j = 0; j < p; ++j) {
    const auto i = static_cast<size_t>(j);
    const bool empty = (me + j) % 3 == 2;
    counts[i] = empty ? 0 : 1;
    stypes[i] = (me + j) % 2 ? kinds[1].send : contiguous8.get();  // runs of 32 B, or contiguous
    rtypes[i] = kinds[5].recv;                                     // runs of 32 B
    displs[i] = j * kSlot * 8;
  }
  const std::vector<double> src = pattern(n * kSlot, 7);
  std::vector<double> ref(n * kSlot, -1.0);
  PMPI_Alltoallw(src.data(), counts.data(), displs.data(), stypes.data(), ref.data(), counts.data(), displs.data(),
                 rtypes.data(), MPI_COMM_WORLD);
  for (int round = 0; round < 2; ++round) {
    std::vector<double> out(n * kSlot, -1.0);
    Counted c;
    ASSERT_EQ(MPI_Alltoallw(src.data(), counts.data(), displs.data(), stypes.data(), out.data(), counts.data(),
                            displs.data(), rtypes.data(), MPI_COMM_WORLD),
              MPI_SUCCESS);
    EXPECT_EQ(out, ref);
    EXPECT_EQ(c.passed(), 1u);
    EXPECT_EQ(c.taken(), 0u);
    EXPECT_EQ(c.staged() + c.runs(), 0u);
  }
}

// Blocks that are one run of a non-contiguous type (a subarray row) sent,
// strided blocks received: the call is taken for the receive side, and the
// runs ride along, handed over as bytes where they lie. Runs alone do not
// make a call worth taking.
TEST(AlltoallPerBlock, AlltoallwHandsRunsOverAsBytes) {
  const Kinds kinds;
  const int p = size_of();
  const auto n = static_cast<size_t>(p);
  std::vector<int> scounts(n, 1), rcounts(n, 1), displs(n);
  std::vector<MPI_Datatype> stypes(n, kinds[4].send), rtypes(n, kinds[4].recv);
  for (int j = 0; j < p; ++j) displs[static_cast<size_t>(j)] = j * kSlot * 8;
  const std::vector<double> src = pattern(n * kSlot, 9);
  std::vector<double> out(n * kSlot, -1.0), ref(n * kSlot, -1.0);
  Counted c;
  ASSERT_EQ(MPI_Alltoallw(src.data(), scounts.data(), displs.data(), stypes.data(), out.data(), rcounts.data(),
                          displs.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  PMPI_Alltoallw(src.data(), scounts.data(), displs.data(), stypes.data(), ref.data(), rcounts.data(), displs.data(),
                 rtypes.data(), MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(c.taken(), 1u);
  EXPECT_EQ(c.staged() + c.runs(), 2 * n);  // runs, or staged where out of an int's reach
  EXPECT_GE(c.staged(), n);
  EXPECT_EQ(c.typed(), 0u);

  // Runs alone: passed through.
  std::vector<int> r8(n, 8);
  std::vector<MPI_Datatype> doubles(n, MPI_DOUBLE);
  std::fill(out.begin(), out.end(), -1.0);
  std::fill(ref.begin(), ref.end(), -1.0);
  Counted alone;
  ASSERT_EQ(MPI_Alltoallw(src.data(), scounts.data(), displs.data(), stypes.data(), out.data(), r8.data(),
                          displs.data(), doubles.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  PMPI_Alltoallw(src.data(), scounts.data(), displs.data(), stypes.data(), ref.data(), r8.data(), displs.data(),
                 doubles.data(), MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(alone.passed(), 1u);
  EXPECT_EQ(alone.runs(), 0u);
}

// Alltoallv: one type per side, so a side is staged whole or not at all.
// Counts 0, 1 or 2 per peer; each combination of packing sides.
void check_alltoallv(MPI_Datatype stype, MPI_Datatype rtype, bool send_packs, bool recv_packs, bool in_place) {
  const int p = size_of(), me = rank_of();
  const auto n = static_cast<size_t>(p);
  MPI_Aint lb = 0, sext = 0, rext = 0;
  MPI_Type_get_extent(stype, &lb, &sext);
  MPI_Type_get_extent(rtype, &lb, &rext);
  std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
  Expected expect;
  for (int j = 0; j < p; ++j) {
    const auto i = static_cast<size_t>(j);
    scounts[i] = rcounts[i] = (me + j) % 3;  // what j sends me is what I send j
    sdispls[i] = static_cast<int>(j * kSlot * 8 / sext);
    rdispls[i] = static_cast<int>(j * kSlot * 8 / rext);
    if (!in_place) expect.add(scounts[i], send_packs);
    expect.add(rcounts[i], recv_packs);
  }
  const bool side_staged = expect.staged > 0;
  const std::vector<double> src = pattern(n * kSlot, 3);
  std::vector<double> out = in_place ? pattern(n * kSlot, 4) : std::vector<double>(n * kSlot, -1.0);
  std::vector<double> ref = out;
  const void* sbuf = in_place ? MPI_IN_PLACE : src.data();
  Counted c;
  ASSERT_EQ(MPI_Alltoallv(sbuf, scounts.data(), sdispls.data(), stype, out.data(), rcounts.data(), rdispls.data(),
                          rtype, MPI_COMM_WORLD),
            MPI_SUCCESS);
  ASSERT_EQ(PMPI_Alltoallv(sbuf, scounts.data(), sdispls.data(), stype, ref.data(), rcounts.data(), rdispls.data(),
                           rtype, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(c.taken(), side_staged ? 1u : 0u);
  EXPECT_EQ(c.passed(), side_staged ? 0u : 1u);
  // A side with a block worth packing stages all its moving blocks.
  uint64_t whole = 0;
  for (int j = 0; j < p; ++j) {
    const int count = (me + j) % 3;
    if (!in_place && send_packs) whole += count > 0;
    if (recv_packs) whole += count > 0;
  }
  EXPECT_EQ(c.staged(), whole);
}

TEST(AlltoallPerBlock, AlltoallvStagesWholeSides) {
  const Kinds kinds;
  Type contiguous8([] {
    MPI_Datatype t;
    MPI_Type_contiguous(8, MPI_DOUBLE, &t);
    return t;
  }());
  // strided -> contiguous, runs -> strided, runs -> runs (nothing staged), strided -> strided.
  check_alltoallv(kinds[0].send, contiguous8.get(), true, false, false);
  check_alltoallv(kinds[1].send, kinds[4].recv, false, true, false);
  check_alltoallv(kinds[1].send, kinds[5].recv, false, false, false);
  check_alltoallv(kinds[0].send, kinds[4].recv, true, true, false);
  // In place: the receive side is sent too.
  check_alltoallv(kinds[0].send, kinds[0].send, false, true, true);
  check_alltoallv(kinds[0].send, contiguous8.get(), false, false, true);
}

// Neighbor_alltoallw/v on a 2-D Cartesian grid, periodic along the first
// dimension only: border ranks have MPI_PROC_NULL neighbours along the second,
// whose receive blocks the library leaves alone, and so must Veneer. Every
// block carries 8 doubles (kinds 0-2, 4-5), so whichever way the library
// pairs the messages of a rank that is both neighbours, they fit.
TEST(AlltoallPerBlock, NeighborhoodOnCartesianGrid) {
  const Kinds kinds;
  const int p = size_of();
  int dims[2] = {0, 0}, periods[2] = {1, 0};
  MPI_Dims_create(p, 2, dims);
  MPI_Comm cart;
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart), MPI_SUCCESS);
  // Slot 2d+1 sends up dimension d, received by the neighbour in its slot 2d.
  const int up[2] = {0, 2}, down[2] = {5, 4};
  int scounts[4], rcounts[4];
  MPI_Aint sdispls[4], rdispls[4];
  MPI_Datatype stypes[4], rtypes[4];
  Expected expect;
  for (int d = 0; d < 2; ++d) {
    int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
    MPI_Cart_shift(cart, d, 1, &below, &above);
    const Kind &u = kinds[up[d]], &w = kinds[down[d]];
    scounts[2 * d + 1] = u.send_count, stypes[2 * d + 1] = u.send;
    rcounts[2 * d] = u.recv_count, rtypes[2 * d] = u.recv;
    scounts[2 * d] = w.send_count, stypes[2 * d] = w.send;
    rcounts[2 * d + 1] = w.recv_count, rtypes[2 * d + 1] = w.recv;
    if (above != MPI_PROC_NULL)
      expect.add(u.send_count, u.send_packs, u.send_run), expect.add(w.recv_count, w.recv_packs);
    if (below != MPI_PROC_NULL)
      expect.add(w.send_count, w.send_packs, w.send_run), expect.add(u.recv_count, u.recv_packs);
  }
  for (int s = 0; s < 4; ++s) sdispls[s] = rdispls[s] = MPI_Aint{s} * kSlot * 8;
  const std::vector<double> src = pattern(4 * kSlot, 5);
  std::vector<double> out(4 * kSlot, -1.0), ref(4 * kSlot, -1.0);
  Counted c;
  ASSERT_EQ(MPI_Neighbor_alltoallw(src.data(), scounts, sdispls, stypes, out.data(), rcounts, rdispls, rtypes, cart),
            MPI_SUCCESS);
  PMPI_Neighbor_alltoallw(src.data(), scounts, sdispls, stypes, ref.data(), rcounts, rdispls, rtypes, cart);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(c.taken(), expect.taken() ? 1u : 0u);
  EXPECT_EQ(c.staged(), expect.staged);  // MPI_Aint displacements: always mixed, never widened
  EXPECT_EQ(c.runs(), expect.taken() ? expect.runs : 0);
  EXPECT_EQ(c.typed(), expect.taken() ? expect.moving - expect.staged - expect.runs : 0);

  // Neighbor_alltoallv: one strided type sent, contiguous doubles received.
  int vcounts[4] = {1, 1, 1, 1}, vsd[4], vrd[4];
  for (int s = 0; s < 4; ++s) vsd[s] = s * kSlot * 8 / 120, vrd[s] = s * kSlot;
  std::fill(out.begin(), out.end(), -1.0);
  std::fill(ref.begin(), ref.end(), -1.0);
  int v8[4] = {8, 8, 8, 8};
  Counted cv;
  ASSERT_EQ(MPI_Neighbor_alltoallv(src.data(), vcounts, vsd, kinds[0].send, out.data(), v8, vrd, MPI_DOUBLE, cart),
            MPI_SUCCESS);
  PMPI_Neighbor_alltoallv(src.data(), vcounts, vsd, kinds[0].send, ref.data(), v8, vrd, MPI_DOUBLE, cart);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(cv.taken(), 1u);
  MPI_Comm_free(&cart);
}

// A distributed graph with repeated neighbours and three blocks per rank:
// two to the next rank, one to the one after (with one or two ranks, to
// itself). Receive slot i of b matches send slot i of its sources.
void check_dist_graph(bool bottom) {
  const Kinds kinds;
  const int p = size_of(), me = rank_of();
  const int dests[3] = {(me + 1) % p, (me + 1) % p, (me + 2) % p};
  const int sources[3] = {(me - 1 + p) % p, (me - 1 + p) % p, (me - 2 + 2 * p) % p};
  MPI_Comm graph;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 3, sources, MPI_UNWEIGHTED, 3, dests, MPI_UNWEIGHTED,
                                           MPI_INFO_NULL, 0, &graph),
            MPI_SUCCESS);
  const int which[3] = {0, 5, 2};
  int scounts[3], rcounts[3];
  MPI_Aint sdispls[3], rdispls[3];
  MPI_Datatype stypes[3], rtypes[3];
  Expected expect;
  const std::vector<double> src = pattern(3 * kSlot, 6);
  std::vector<double> out(3 * kSlot, -1.0), ref(3 * kSlot, -1.0);
  for (int s = 0; s < 3; ++s) {
    const Kind& k = kinds[which[s]];
    scounts[s] = k.send_count, stypes[s] = k.send;
    rcounts[s] = k.recv_count, rtypes[s] = k.recv;
    sdispls[s] = rdispls[s] = MPI_Aint{s} * kSlot * 8;
    expect.add(k.send_count, k.send_packs);
    expect.add(k.recv_count, k.recv_packs);
  }
  const void* sbuf = src.data();
  void* rbuf = out.data();
  if (bottom) {
    // Absolute addresses from MPI_BOTTOM.
    MPI_Aint s0 = 0, r0 = 0;
    MPI_Get_address(src.data(), &s0);
    MPI_Get_address(out.data(), &r0);
    for (int s = 0; s < 3; ++s) sdispls[s] += s0, rdispls[s] += r0;
    sbuf = MPI_BOTTOM;
    rbuf = MPI_BOTTOM;
  }
  Counted c;
  ASSERT_EQ(MPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, graph), MPI_SUCCESS);
  EXPECT_EQ(c.taken(), 1u);
  EXPECT_EQ(c.staged(), expect.staged);
  EXPECT_EQ(c.typed(), expect.moving - expect.staged);
  if (bottom) {
    MPI_Aint r0 = 0, q0 = 0;
    MPI_Get_address(out.data(), &r0);
    MPI_Get_address(ref.data(), &q0);
    for (int s = 0; s < 3; ++s) rdispls[s] += q0 - r0;
  }
  ASSERT_EQ(PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, bottom ? MPI_BOTTOM : ref.data(), rcounts, rdispls,
                                    rtypes, graph),
            MPI_SUCCESS);
  EXPECT_EQ(out, ref);
  MPI_Comm_free(&graph);
}

TEST(AlltoallPerBlock, NeighborhoodOnDistributedGraph) { check_dist_graph(false); }
TEST(AlltoallPerBlock, NeighborhoodFromMpiBottom) { check_dist_graph(true); }

// VENEER_ALLTOALL_MIN_BYTES above every block: nothing is staged.
TEST(AlltoallPerBlock, MinimumBytesKeepsSmallBlocksTyped) {
  setenv("VENEER_ALLTOALL_MIN_BYTES", "1k", 1);
  veneer::reload_config();
  const Kinds kinds;
  const int p = size_of();
  const auto n = static_cast<size_t>(p);
  std::vector<int> counts(n, 1), displs(n);
  std::vector<MPI_Datatype> stypes(n, kinds[0].send), rtypes(n, kinds[4].recv);  // both would pack
  for (int j = 0; j < p; ++j) displs[static_cast<size_t>(j)] = j * kSlot * 8;
  const std::vector<double> src = pattern(n * kSlot, 8);
  std::vector<double> out(n * kSlot, -1.0), ref(n * kSlot, -1.0);
  Counted c;
  ASSERT_EQ(MPI_Alltoallw(src.data(), counts.data(), displs.data(), stypes.data(), out.data(), counts.data(),
                          displs.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  setenv("VENEER_ALLTOALL_MIN_BYTES", "0", 1);
  veneer::reload_config();
  PMPI_Alltoallw(src.data(), counts.data(), displs.data(), stypes.data(), ref.data(), counts.data(), displs.data(),
                 rtypes.data(), MPI_COMM_WORLD);
  EXPECT_EQ(out, ref);
  EXPECT_EQ(c.passed(), 1u);
  EXPECT_EQ(c.staged(), 0u);
}

}  // namespace
