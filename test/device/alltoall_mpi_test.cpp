// SPDX-License-Identifier: BSD-3-Clause
// Alltoallv/w and Neighbor_alltoallv/w on device buffers.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

// Four doubles of every three-double stride, or the same four doubles contiguous.
struct AlltoallTypes {
  MPI_Datatype vec = MPI_DATATYPE_NULL;
  AlltoallTypes() {
    MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
  }
  ~AlltoallTypes() { MPI_Type_free(&vec); }
};

// One side of an exchange: counts and displacements (with a one-extent gap
// between blocks, which must stay untouched) in units of `type`.
struct SidePlan {
  MPI_Datatype type;
  std::vector<int> counts, displs;
  int slots = 0;
};
SidePlan side_plan(MPI_Datatype type, int per_unit, const std::vector<int>& units) {
  SidePlan s{type, {}, {}, 0};
  for (int u : units) {
    s.counts.push_back(u * per_unit);
    s.displs.push_back(s.slots);
    s.slots += u * per_unit + 1;
  }
  return s;
}

// Runs the exchange through Veneer (each side on the device or the host) and
// through the library on host copies, and compares the receive buffers.
void check_alltoallv(MPI_Comm comm, bool neighborhood, const SidePlan& sp, bool send_dev, const SidePlan& rp,
                     bool recv_dev, int salt) {
  const int me = rank_of();
  Typed src(sp.type, sp.slots, data_seed(me, salt));
  Typed dst(rp.type, rp.slots, sentinel_seed(me, salt));
  Typed ref(rp.type, rp.slots, sentinel_seed(me, salt));
  auto fn = neighborhood ? MPI_Neighbor_alltoallv : MPI_Alltoallv;
  auto ref_fn = neighborhood ? PMPI_Neighbor_alltoallv : PMPI_Alltoallv;
  ASSERT_EQ(fn(send_dev ? src.dev() : src.host(), sp.counts.data(), sp.displs.data(), sp.type,
               recv_dev ? dst.dev() : dst.host(), rp.counts.data(), rp.displs.data(), rp.type, comm),
            MPI_SUCCESS);
  ASSERT_EQ(ref_fn(src.host(), sp.counts.data(), sp.displs.data(), sp.type, ref.host(), rp.counts.data(),
                   rp.displs.data(), rp.type, comm),
            MPI_SUCCESS);
  EXPECT_TRUE(same_bytes(recv_dev ? dst.download() : dst.image(), ref.image()));
  EXPECT_TRUE(same_bytes(src.download(), src.image()));
}

TEST_F(Device, AlltoallvVectorAndContiguous) {
  AlltoallTypes t;
  const int me = rank_of(), p = size_of();
  // From rank a to rank b go 1 + (a + 2b) % 3 units of four doubles.
  std::vector<int> out_units, in_units;
  for (int j = 0; j < p; ++j) {
    out_units.push_back(1 + (me + 2 * j) % 3);
    in_units.push_back(1 + (j + 2 * me) % 3);
  }
  struct Case {
    bool vec_send, send_dev, vec_recv, recv_dev;
  };
  const Case cases[] = {{true, true, true, true},   {true, true, false, false}, {false, false, true, true},
                        {false, true, false, true}, {false, true, true, true},  {true, true, false, true}};
  int salt = 90;
  for (const Case& c : cases) {
    SCOPED_TRACE(salt);
    const SidePlan sp = c.vec_send ? side_plan(t.vec, 1, out_units) : side_plan(MPI_DOUBLE, 4, out_units);
    const SidePlan rp = c.vec_recv ? side_plan(t.vec, 1, in_units) : side_plan(MPI_DOUBLE, 4, in_units);
    check_alltoallv(MPI_COMM_WORLD, false, sp, c.send_dev, rp, c.recv_dev, salt++);
  }
  // Empty blocks: (a + 2b) % 3 units, zero for a third of the pairs (all of them on one rank).
  for (int j = 0; j < p; ++j) {
    out_units[static_cast<size_t>(j)] = (me + 2 * j) % 3;
    in_units[static_cast<size_t>(j)] = (j + 2 * me) % 3;
  }
  check_alltoallv(MPI_COMM_WORLD, false, side_plan(t.vec, 1, out_units), true, side_plan(t.vec, 1, in_units), true,
                  salt++);
  check_alltoallv(MPI_COMM_WORLD, false, side_plan(MPI_DOUBLE, 4, out_units), true, side_plan(t.vec, 1, in_units), true,
                  salt++);
}

// A ring of p ranks, periodic or open (the ends then have MPI_PROC_NULL
// neighbours, whose receive blocks the library leaves untouched).
void check_neighbor_ring(bool periodic, int salt) {
  AlltoallTypes t;
  const int p = size_of();
  MPI_Comm cart;
  const int dims[] = {p}, periods[] = {periodic ? 1 : 0};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  // Neighbours: [left, right]. Two units go left and three right, so three
  // come from the left and two from the right.
  const std::vector<int> out_units = {2, 3}, in_units = {3, 2};
  struct Case {
    bool vec_send, send_dev, vec_recv, recv_dev;
  };
  const Case cases[] = {
      {true, true, true, true}, {true, true, false, false}, {false, false, true, true}, {false, true, false, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(salt);
    const SidePlan sp = c.vec_send ? side_plan(t.vec, 1, out_units) : side_plan(MPI_DOUBLE, 4, out_units);
    const SidePlan rp = c.vec_recv ? side_plan(t.vec, 1, in_units) : side_plan(MPI_DOUBLE, 4, in_units);
    check_alltoallv(cart, true, sp, c.send_dev, rp, c.recv_dev, salt++);
  }
  MPI_Comm_free(&cart);
}

TEST_F(Device, NeighborAlltoallvOnAPeriodicRing) {
  // On 1 or 2 ranks left and right are the same rank, and which block meets
  // which is the library's choice (MPICH 4.0 pairs them in posting order, so
  // a 3-unit block lands in a 2-unit one): only distinct neighbours here.
  if (size_of() < 3) GTEST_SKIP() << "needs 3 ranks";
  check_neighbor_ring(true, 100);
}

// The receive blocks of MPI_PROC_NULL neighbours (the ends of an open ring)
// are left untouched by the library, and so by Veneer.
TEST_F(Device, NeighborAlltoallvOnAnOpenRing) { check_neighbor_ring(false, 104); }

TEST_F(Device, NeighborAlltoallvOnADistGraphWithUnequalDegrees) {
  AlltoallTypes t;
  const int me = rank_of(), p = size_of();
  // Rank a sends to every rank b <= a: me + 1 destinations, p - me sources.
  std::vector<int> sources, dests, out_units, in_units;
  for (int j = me; j < p; ++j) {
    sources.push_back(j);
    in_units.push_back(1 + (j + 2 * me) % 3);
  }
  for (int j = 0; j <= me; ++j) {
    dests.push_back(j);
    out_units.push_back(1 + (me + 2 * j) % 3);
  }
  MPI_Comm graph;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(sources.size()), sources.data(), MPI_UNWEIGHTED,
                                 static_cast<int>(dests.size()), dests.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &graph);
  const SidePlan sp = side_plan(t.vec, 1, out_units);
  check_alltoallv(graph, true, sp, true, side_plan(t.vec, 1, in_units), true, 108);
  check_alltoallv(graph, true, sp, true, side_plan(MPI_DOUBLE, 4, in_units), true, 109);
  check_alltoallv(graph, true, side_plan(MPI_DOUBLE, 4, out_units), false, side_plan(t.vec, 1, in_units), true, 110);
  MPI_Comm_free(&graph);
}

// One side of an Alltoallw: per block a count, a type and a byte displacement
// (blocks 8 bytes apart, gaps that must stay untouched), in a buffer of `bytes`.
struct WSide {
  std::vector<int> counts;
  std::vector<MPI_Datatype> types;
  std::vector<MPI_Aint> displs;
  int bytes = 0;
};
// Block i holds units[i] x four doubles as `vec` instances (strided) or as doubles.
WSide w_side(const std::vector<int>& units, const std::vector<bool>& strided, MPI_Datatype vec) {
  WSide s;
  for (size_t i = 0; i < units.size(); ++i) {
    s.types.push_back(strided[i] ? vec : MPI_DOUBLE);
    s.counts.push_back(strided[i] ? units[i] : 4 * units[i]);
    s.displs.push_back(s.bytes);
    s.bytes += units[i] * 80 + 8;  // a vec's extent is 10 doubles
  }
  s.bytes = std::max(s.bytes, 1);
  return s;
}

// Through Veneer (each side on the device or the host) and through the
// library on host copies; the receive buffers must match byte for byte.
void check_alltoallw(MPI_Comm comm, bool neighborhood, const WSide& sp, bool send_dev, const WSide& rp, bool recv_dev,
                     int salt) {
  const int me = rank_of();
  Typed src(MPI_BYTE, sp.bytes, data_seed(me, salt));
  Typed dst(MPI_BYTE, rp.bytes, sentinel_seed(me, salt));
  Typed ref(MPI_BYTE, rp.bytes, sentinel_seed(me, salt));
  void* sbuf = send_dev ? src.dev() : src.host();
  void* rbuf = recv_dev ? dst.dev() : dst.host();
  if (neighborhood) {
    ASSERT_EQ(MPI_Neighbor_alltoallw(sbuf, sp.counts.data(), sp.displs.data(), sp.types.data(), rbuf, rp.counts.data(),
                                     rp.displs.data(), rp.types.data(), comm),
              MPI_SUCCESS);
    ASSERT_EQ(PMPI_Neighbor_alltoallw(src.host(), sp.counts.data(), sp.displs.data(), sp.types.data(), ref.host(),
                                      rp.counts.data(), rp.displs.data(), rp.types.data(), comm),
              MPI_SUCCESS);
  } else {
    const std::vector<int> sd(sp.displs.begin(), sp.displs.end()), rd(rp.displs.begin(), rp.displs.end());
    ASSERT_EQ(MPI_Alltoallw(sbuf, sp.counts.data(), sd.data(), sp.types.data(), rbuf, rp.counts.data(), rd.data(),
                            rp.types.data(), comm),
              MPI_SUCCESS);
    ASSERT_EQ(PMPI_Alltoallw(src.host(), sp.counts.data(), sd.data(), sp.types.data(), ref.host(), rp.counts.data(),
                             rd.data(), rp.types.data(), comm),
              MPI_SUCCESS);
  }
  EXPECT_TRUE(same_bytes(recv_dev ? dst.download() : dst.image(), ref.image()));
  EXPECT_TRUE(same_bytes(src.download(), src.image()));
}

TEST_F(Device, AlltoallwMixedTypesPerBlock) {
  AlltoallTypes t;
  const int me = rank_of(), p = size_of();
  // From rank a to rank b: 1 + (a + 2b) % 3 units (or (a + 2b) % 3: some
  // empty), strided on the send side when a + b is even, on the receive
  // side when b is odd: every pairing of strided and contiguous blocks.
  for (int with_empty = 0; with_empty < 2; ++with_empty) {
    std::vector<int> out_units, in_units;
    std::vector<bool> out_strided, in_strided;
    for (int j = 0; j < p; ++j) {
      out_units.push_back((with_empty ? 0 : 1) + (me + 2 * j) % 3);
      in_units.push_back((with_empty ? 0 : 1) + (j + 2 * me) % 3);
      out_strided.push_back((me + j) % 2 == 0);
      in_strided.push_back(me % 2 == 1);
    }
    const WSide sp = w_side(out_units, out_strided, t.vec), rp = w_side(in_units, in_strided, t.vec);
    const bool sides[][2] = {{true, true}, {true, false}, {false, true}};
    int salt = 200 + 10 * with_empty;
    for (const auto& d : sides) {
      SCOPED_TRACE(salt);
      check_alltoallw(MPI_COMM_WORLD, false, sp, d[0], rp, d[1], salt++);
    }
  }
}

// The halo3d shape: a distributed graph whose neighbours repeat (every rank
// twice, in a fixed order on both sides) and an open ring's MPI_PROC_NULL
// neighbours (blocks left untouched).
TEST_F(Device, NeighborAlltoallwOnAGraphAndAnOpenRing) {
  AlltoallTypes t;
  const int p = size_of();
  std::vector<int> peers;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < p; ++j) peers.push_back(j);
  MPI_Comm graph;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(peers.size()), peers.data(), MPI_UNWEIGHTED,
                                 static_cast<int>(peers.size()), peers.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &graph);
  // Every block the same size (the library pairs repeated edges in order),
  // strided or not by position.
  std::vector<int> units(peers.size(), 2);
  std::vector<bool> strided_out, strided_in;
  for (size_t i = 0; i < peers.size(); ++i) {
    strided_out.push_back(i % 2 == 0);
    strided_in.push_back(i % 3 == 0);
  }
  check_alltoallw(graph, true, w_side(units, strided_out, t.vec), true, w_side(units, strided_in, t.vec), true, 230);
  check_alltoallw(graph, true, w_side(units, strided_out, t.vec), false, w_side(units, strided_in, t.vec), true, 231);
  MPI_Comm_free(&graph);

  MPI_Comm ring;
  const int dims[] = {p}, periods[] = {0};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  // [left, right]: three units go left and come from the right, two the other way.
  const WSide sp = w_side({3, 2}, {true, false}, t.vec), rp = w_side({2, 3}, {false, true}, t.vec);
  check_alltoallw(ring, true, sp, true, rp, true, 232);
  MPI_Comm_free(&ring);
}

}  // namespace
}  // namespace veneer::test
