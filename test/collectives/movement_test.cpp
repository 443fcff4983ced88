// SPDX-License-Identifier: BSD-3-Clause
// Every Bcast, Allgather and Alltoall algorithm, forced one at a time, on
// every pretend node layout, against the library: dense and gapped named
// types, a derived type with gaps, and senders and receivers that describe
// the same bytes with different types; in place, count 0, several roots.
// Buffers start with the same pattern, gaps included, and must end equal byte
// for byte.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "algorithms/collectives.h"
#include "test/collectives/harness.h"

namespace veneer::test {
namespace {

struct Side {
  MPI_Datatype type;
  int per;  // this type's elements per unit of the case's count
};

struct MoveCase {
  std::string name;
  Side send;     // Bcast: the root's side
  Side receive;  // Bcast: the other ranks' side
};

enum class Derived { gapped, four, reordered, indexed, pair, pair_unknown };

// Derived types, committed once: all but pair_unknown through Veneer's type
// cache (packed by Veneer's packer); pair_unknown only by the library, as a
// type Veneer never saw committed, which the library packs.
MPI_Datatype derived(Derived which) {
  static std::map<Derived, MPI_Datatype> types;
  if (types.empty()) {
    MPI_Datatype t = MPI_DATATYPE_NULL;
    PMPI_Type_vector(2, 1, 2, MPI_INT, &t);
    commit(&t);
    types[Derived::gapped] = t;
    PMPI_Type_contiguous(4, MPI_INT, &t);
    commit(&t);
    types[Derived::four] = t;
    // An int at byte 8, then a short at byte 0: the packed order is not the memory order.
    const int lengths[2] = {1, 1};
    const MPI_Aint displacements[2] = {8, 0};
    const MPI_Datatype members[2] = {MPI_INT, MPI_SHORT};
    PMPI_Type_create_struct(2, lengths, displacements, members, &t);
    commit(&t);
    types[Derived::reordered] = t;
    // Two ints at int 3, then one at int 0 (extent 5 ints).
    const int block_lengths[2] = {2, 1}, block_displacements[2] = {3, 0};
    PMPI_Type_indexed(2, block_lengths, block_displacements, MPI_INT, &t);
    commit(&t);
    types[Derived::indexed] = t;
    PMPI_Type_contiguous(2, MPI_INT, &t);
    commit(&t);
    types[Derived::pair] = t;
    PMPI_Type_contiguous(2, MPI_INT, &t);
    PMPI_Type_commit(&t);
    types[Derived::pair_unknown] = t;
  }
  return types[which];
}

std::vector<MoveCase> cases() {
  return {
      {"int", {MPI_INT, 1}, {MPI_INT, 1}},
      {"short_int (named, with a gap)", {MPI_SHORT_INT, 1}, {MPI_SHORT_INT, 1}},
      {"vector(2,1,2,int) (derived, with gaps)", {derived(Derived::gapped), 1}, {derived(Derived::gapped), 1}},
      {"contiguous(4,int) sent, int received", {derived(Derived::four), 1}, {MPI_INT, 4}},
      {"struct{int at 8, short at 0} (packed order differs from memory order)",
       {derived(Derived::reordered), 1},
       {derived(Derived::reordered), 1}},
      {"indexed({2,1},{3,0},int) (blocks out of order)",
       {derived(Derived::indexed), 1},
       {derived(Derived::indexed), 1}},
      {"vector(2,1,2,int) sent, contiguous(2,int) received",
       {derived(Derived::gapped), 1},
       {derived(Derived::pair), 1}},
      {"contiguous(2,int) unknown to Veneer sent, vector(2,1,2,int) received",
       {derived(Derived::pair_unknown), 1},
       {derived(Derived::gapped), 1}},
  };
}

int64_t extent_of(MPI_Datatype t) {
  MPI_Aint lb, extent;
  PMPI_Type_get_extent(t, &lb, &extent);
  return extent;
}

std::vector<unsigned char> patterned(int64_t bytes, int rank, uint32_t salt) {
  std::vector<unsigned char> b(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<unsigned char>((i * 131 + static_cast<size_t>(rank) * 17 + salt) >> 1);
  return b;
}

struct Runner {
  Failures failures;
  std::map<std::string, int> runs;

  // Runs `call` with every algorithm on every layout; `prepare` resets the buffers, `expected` is the library's result.
  template <class Prepare>
  void all_algorithms(Collective c, const std::vector<Layout>& lays, Call call, Prepare prepare,
                      const std::vector<unsigned char>& expected, const std::string& what) {
    for (const Layout& layout : lays) {
      for (const algorithms::Algorithm* a : algorithms::algorithms_for(c)) {
        std::vector<unsigned char> out;
        prepare(call, out);
        std::string why;
        auto rc = algorithms::run_with(a->name, call, *layout.h, &why);
        const std::string full = std::string(a->name) + " on " + layout.name + ", " + what;
        if (!rc) {
          if (a->needs.power_of_two && (layout.h->size & (layout.h->size - 1))) continue;
          failures.add(full + ": refused: " + why);
          continue;
        }
        ++runs[std::string(a->name)];
        if (*rc != MPI_SUCCESS) failures.add(full + ": returned " + std::to_string(*rc));
        else if (out != expected) {
          size_t i = 0;
          while (i < out.size() && out[i] == expected[i]) ++i;
          failures.add(full + ": byte " + std::to_string(i) + " of " + std::to_string(out.size()) + " differs");
        }
      }
    }
  }

  void expect_all_ran(Collective c) {
    for (const algorithms::Algorithm* a : algorithms::algorithms_for(c)) {
      if (a->needs.power_of_two && (world_size() & (world_size() - 1))) continue;
      EXPECT_GT(runs[std::string(a->name)], 0) << a->name << " never ran";
    }
  }
};

TEST(Movement, BcastMatchesTheLibrary) {
  const int p = world_size(), rank = world_rank();
  auto lays = layouts();
  Runner runner;
  uint32_t salt = 0;
  for (const MoveCase& mc : cases()) {
    std::vector<int> counts{0, 7};
    if (!quick()) counts.insert(counts.end(), {1, 300});
    if (mc.name == "int") counts.push_back(140000);  // over 512 KiB: the leaders scatter too
    for (int count : counts) {
      for (int root : std::set<int>{0, p - 1, p / 2}) {
        ++salt;
        // The root describes the message one way, the others another.
        const Side side = rank == root ? mc.send : mc.receive;
        const int n = count * side.per;
        const int64_t bytes = n * extent_of(side.type);
        auto initial = patterned(bytes, rank == root ? 0 : rank + 1, salt);
        auto expected = initial;
        ASSERT_EQ(PMPI_Bcast(expected.data(), n, side.type, root, MPI_COMM_WORLD), MPI_SUCCESS);
        Call call;
        call.collective = Collective::bcast;
        call.count = n;
        call.type = side.type;
        call.root = root;
        runner.all_algorithms(
            Collective::bcast, lays, call,
            [&](Call& c, std::vector<unsigned char>& out) {
              out = initial;
              c.rbuf = out.data();
            },
            expected, mc.name + ", count " + std::to_string(count) + ", root " + std::to_string(root));
      }
    }
  }
  runner.expect_all_ran(Collective::bcast);
}

// Allgather and Alltoall: `blocks` is 1 for Allgather's send side, p for Alltoall's.
void gather_like(Collective c) {
  const int p = world_size(), rank = world_rank();
  const bool alltoall = c == Collective::alltoall;
  auto lays = layouts();
  Runner runner;
  uint32_t salt = 0;
  for (const MoveCase& mc : cases()) {
    for (int count : quick() ? std::vector<int>{0, 7} : std::vector<int>{0, 1, 7, 300}) {
      for (bool in_place : {false, true}) {
        if (in_place && mc.send.type != mc.receive.type) continue;  // in place there is one type
        ++salt;
        const int scount = count * mc.send.per, rcount = count * mc.receive.per;
        const int64_t send_bytes = (alltoall ? p : 1) * scount * extent_of(mc.send.type);
        const int64_t recv_bytes = int64_t{p} * rcount * extent_of(mc.receive.type);
        auto send = patterned(send_bytes, rank, salt);
        auto initial = patterned(recv_bytes, rank + 100, salt);
        auto expected = initial;
        if (c == Collective::allgather)
          ASSERT_EQ(PMPI_Allgather(in_place ? MPI_IN_PLACE : send.data(), scount, mc.send.type, expected.data(), rcount,
                                   mc.receive.type, MPI_COMM_WORLD),
                    MPI_SUCCESS);
        else
          ASSERT_EQ(PMPI_Alltoall(in_place ? MPI_IN_PLACE : send.data(), scount, mc.send.type, expected.data(), rcount,
                                  mc.receive.type, MPI_COMM_WORLD),
                    MPI_SUCCESS);
        Call call;
        call.collective = c;
        call.sbuf = in_place ? MPI_IN_PLACE : send.data();
        call.scount = scount;
        call.stype = mc.send.type;
        call.count = rcount;
        call.type = mc.receive.type;
        runner.all_algorithms(
            c, lays, call,
            [&](Call& cl, std::vector<unsigned char>& out) {
              out = initial;
              cl.rbuf = out.data();
            },
            expected, mc.name + ", count " + std::to_string(count) + (in_place ? ", in place" : ""));
      }
    }
  }
  runner.expect_all_ran(c);
}

TEST(Movement, AllgatherMatchesTheLibrary) { gather_like(Collective::allgather); }
TEST(Movement, AlltoallMatchesTheLibrary) { gather_like(Collective::alltoall); }

}  // namespace
}  // namespace veneer::test
