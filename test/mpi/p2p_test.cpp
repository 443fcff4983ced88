// SPDX-License-Identifier: BSD-3-Clause
// Sends, receives and every completion call with non-contiguous host types
// through Veneer, checked against the library's own pack (PMPI_Pack) and
// against the same operation done by the library (PMPI_*).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "datatypes/cache.h"
#include "interposer/switchboard.h"
#include "support/config.h"
#include "test/mpi/ranks.h"

namespace {

// vector(n, 1 double, stride 3): a strided column, the classic worst case.
struct Column {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int n;
  explicit Column(int n_, int block = 1, int stride = 3) : n(n_) {
    MPI_Type_vector(n, block, stride, MPI_DOUBLE, &type);
    MPI_Type_commit(&type);
  }
  ~Column() { MPI_Type_free(&type); }
  Column(const Column&) = delete;
  Column& operator=(const Column&) = delete;
};

std::vector<double> pattern(size_t n, double seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + static_cast<double>(i) * 0.5;
  return v;
}

// The library's own bytes for `count` of `type` at buf.
std::vector<char> library_pack(const void* buf, int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<char> out(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(buf, count, type, out.data(), size, &pos, MPI_COMM_WORLD);
  out.resize(static_cast<size_t>(pos));
  return out;
}

}  // namespace

TEST(P2P, SelfIsendIrecvAllCompletionCalls) {
  Column col(200);
  const int me = rank_of();
  // Each completion call gets its own round.
  for (int round = 0; round < 7; ++round) {
    auto src = pattern(600, round * 1000.0 + me);
    std::vector<double> dst(600, -1.0), ref(600, -1.0);
    MPI_Request reqs[2];
    MPI_Irecv(dst.data(), 1, col.type, me, round, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(src.data(), 1, col.type, me, round, MPI_COMM_WORLD, &reqs[1]);
    MPI_Status st[2];
    switch (round) {
      case 0: MPI_Waitall(2, reqs, st); break;
      case 1: MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE); break;
      case 2: {
        int flag = 0;
        while (!flag) MPI_Testall(2, reqs, &flag, st);
        break;
      }
      case 3: {
        for (int done = 0; done < 2; ++done) {
          int idx = -1;
          MPI_Waitany(2, reqs, &idx, &st[0]);
          ASSERT_NE(idx, MPI_UNDEFINED);
        }
        break;
      }
      case 4: {
        int left = 2;
        while (left > 0) {
          int out = 0, idx[2];
          MPI_Waitsome(2, reqs, &out, idx, MPI_STATUSES_IGNORE);
          left -= out;
        }
        break;
      }
      case 5: {
        int left = 2;
        while (left > 0) {
          int out = 0, idx[2];
          MPI_Testsome(2, reqs, &out, idx, st);
          if (out != MPI_UNDEFINED) left -= out;
        }
        break;
      }
      case 6: {
        int flag = 0;
        MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
        while (!flag) MPI_Test(&reqs[0], &flag, &st[0]);
        break;
      }
    }
    // Reference: the library moves the same column.
    MPI_Request r2[2];
    PMPI_Irecv(ref.data(), 1, col.type, me, 99, MPI_COMM_WORLD, &r2[0]);
    PMPI_Isend(src.data(), 1, col.type, me, 99, MPI_COMM_WORLD, &r2[1]);
    PMPI_Waitall(2, r2, MPI_STATUSES_IGNORE);
    EXPECT_EQ(dst, ref) << "round " << round;
  }
}

TEST(P2P, StatusMatchesLibrary) {
  if (size_of() < 2) GTEST_SKIP() << "needs 2 ranks";
  Column col(100);
  const int me = rank_of();
  auto src = pattern(300, 7.0);
  if (me == 0) {
    // Whole message, then a partial one (40 doubles: 40 of 100 elements), then bytes that
    // end mid-double.
    MPI_Send(src.data(), 1, col.type, 1, 1, MPI_COMM_WORLD);
    MPI_Send(src.data(), 40, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
    MPI_Send(src.data(), 44, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
    // The same three to the library's receive.
    MPI_Send(src.data(), 1, col.type, 1, 4, MPI_COMM_WORLD);
    MPI_Send(src.data(), 40, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
    MPI_Send(src.data(), 44, MPI_BYTE, 1, 6, MPI_COMM_WORLD);
  } else if (me == 1) {
    for (int t = 1; t <= 3; ++t) {
      std::vector<double> a(300, -1.0), b(300, -1.0);
#ifdef MPICH_VERSION
      // MPICH rejects a message that ends inside a basic element (a type mismatch,
      // erroneous MPI); only Open MPI defines what happens, so only it is compared.
      if (t == 3) {
        MPI_Recv(a.data(), 44, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(a.data(), 44, MPI_BYTE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        continue;
      }
#endif
      MPI_Status sa, sb;
      MPI_Recv(a.data(), 1, col.type, MPI_ANY_SOURCE, t, MPI_COMM_WORLD, &sa);
      PMPI_Recv(b.data(), 1, col.type, MPI_ANY_SOURCE, t + 3, MPI_COMM_WORLD, &sb);
      EXPECT_EQ(sa.MPI_SOURCE, sb.MPI_SOURCE);
      EXPECT_EQ(sa.MPI_TAG + 3, sb.MPI_TAG);
      int ca = 0, cb = 0, ea = 0, eb = 0;
      MPI_Get_count(&sa, col.type, &ca);
      MPI_Get_count(&sb, col.type, &cb);
      MPI_Get_elements(&sa, col.type, &ea);
      MPI_Get_elements(&sb, col.type, &eb);
      EXPECT_EQ(ca, cb) << "tag " << t;
      EXPECT_EQ(ea, eb) << "tag " << t;
      if (t < 3) {
        EXPECT_EQ(a, b) << "tag " << t;
      } else {
        // 44 bytes: 5 whole doubles arrive; Veneer places them like the library does.
        for (int i = 0; i < 5; ++i) EXPECT_EQ(a[static_cast<size_t>(3 * i)], b[static_cast<size_t>(3 * i)]);
      }
    }
  }
}

TEST(P2P, TruncationIsReported) {
  if (size_of() < 2) GTEST_SKIP() << "needs 2 ranks";
  Column col(10);
  const int me = rank_of();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto src = pattern(100, 1.0);
  if (me == 0) {
    MPI_Send(src.data(), 11, MPI_DOUBLE, 1, 0, comm);
    MPI_Send(src.data(), 11, MPI_DOUBLE, 1, 0, comm);
  } else if (me == 1) {
    std::vector<double> a(30), b(30);
    MPI_Status sa, sb;
    const int ra = MPI_Recv(a.data(), 1, col.type, 0, 0, comm, &sa);
    const int rb = PMPI_Recv(b.data(), 1, col.type, 0, 0, comm, &sb);
    int ca = 0, cb = 0;
    MPI_Error_class(ra, &ca);
    MPI_Error_class(rb, &cb);
    EXPECT_EQ(ca, MPI_ERR_TRUNCATE);
    EXPECT_EQ(ca, cb);
  }
  MPI_Comm_free(&comm);
}

TEST(P2P, ProcNullAndProbe) {
  Column col(50);
  auto src = pattern(150, 3.0);
  std::vector<double> dst(150, -1.0);
  MPI_Status st;
  EXPECT_EQ(MPI_Send(src.data(), 1, col.type, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Recv(dst.data(), 1, col.type, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL);
  int count = -1;
  MPI_Get_count(&st, col.type, &count);
  EXPECT_EQ(count, 0);
  // Probe then receive a message sent by Veneer as bytes.
  const int me = rank_of();
  MPI_Request r;
  MPI_Isend(src.data(), 1, col.type, me, 5, MPI_COMM_WORLD, &r);
  MPI_Probe(me, 5, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, col.type, &count);
  EXPECT_EQ(count, 1);
  MPI_Message msg;
  MPI_Mprobe(me, 5, MPI_COMM_WORLD, &msg, &st);
  MPI_Mrecv(dst.data(), 1, col.type, &msg, &st);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(dst[static_cast<size_t>(3 * i)], src[static_cast<size_t>(3 * i)]);
}

TEST(P2P, SendrecvAndReplace) {
  const int me = rank_of(), p = size_of();
  const int right = (me + 1) % p, left = (me + p - 1) % p;
  Column col(64, 2, 5);
  auto src = pattern(64 * 5, 100.0 * me);
  std::vector<double> a(64 * 5, -1.0), b(64 * 5, -1.0);
  MPI_Status sa, sb;
  MPI_Sendrecv(src.data(), 1, col.type, right, 0, a.data(), 1, col.type, left, 0, MPI_COMM_WORLD, &sa);
  PMPI_Sendrecv(src.data(), 1, col.type, right, 0, b.data(), 1, col.type, left, 0, MPI_COMM_WORLD, &sb);
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa.MPI_SOURCE, sb.MPI_SOURCE);
  auto x = src, y = src;
  MPI_Sendrecv_replace(x.data(), 1, col.type, right, 1, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  PMPI_Sendrecv_replace(y.data(), 1, col.type, right, 1, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  EXPECT_EQ(x, y);
}

TEST(P2P, RequestFreeCancelAndGetStatus) {
  Column col(30);
  const int me = rank_of();
  auto src = pattern(90, 11.0);
  std::vector<double> dst(90, -1.0);
  // Request_get_status reports completion and the data is already in place.
  MPI_Request rr, sr;
  MPI_Irecv(dst.data(), 1, col.type, me, 7, MPI_COMM_WORLD, &rr);
  MPI_Isend(src.data(), 1, col.type, me, 7, MPI_COMM_WORLD, &sr);
  int flag = 0;
  MPI_Status st;
  while (!flag) MPI_Request_get_status(rr, &flag, &st);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(dst[static_cast<size_t>(3 * i)], src[static_cast<size_t>(3 * i)]);
  MPI_Wait(&rr, MPI_STATUS_IGNORE);
  // A freed send request still delivers.
  std::vector<double> dst2(90, -1.0);
  MPI_Request fr;
  MPI_Isend(src.data(), 1, col.type, me, 8, MPI_COMM_WORLD, &fr);
  MPI_Request_free(&fr);
  EXPECT_EQ(fr, MPI_REQUEST_NULL);
  MPI_Recv(dst2.data(), 1, col.type, me, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(dst2[static_cast<size_t>(3 * i)], src[static_cast<size_t>(3 * i)]);
  // A cancelled receive leaves the buffer alone and says so.
  std::vector<double> dst3(90, -1.0);
  MPI_Request cr;
  MPI_Irecv(dst3.data(), 1, col.type, me, 9, MPI_COMM_WORLD, &cr);
  MPI_Cancel(&cr);
  MPI_Wait(&cr, &st);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  EXPECT_TRUE(cancelled);
  for (double v : dst3) EXPECT_EQ(v, -1.0);
}

TEST(Alltoall, VAndWAgreeWithLibrary) {
  const int p = size_of(), me = rank_of();
  Column col(16, 1, 2);  // 16 doubles at stride 2: extent 31 doubles
  std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    counts[static_cast<size_t>(i)] = 1 + (i + me) % 3;
    displs[static_cast<size_t>(i)] = 3 * i;  // in extents
  }
  // Receive counts are the senders' counts for us.
  std::vector<int> rcounts(static_cast<size_t>(p)), rdispls(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    rcounts[static_cast<size_t>(i)] = 1 + (me + i) % 3;
    rdispls[static_cast<size_t>(i)] = 3 * i;
  }
  const size_t n = static_cast<size_t>(3 * p) * 31 + 64;
  auto src = pattern(n, 1000.0 * me);
  std::vector<double> a(n, -1.0), b(n, -1.0);
  MPI_Alltoallv(src.data(), counts.data(), displs.data(), col.type, a.data(), rcounts.data(), rdispls.data(), col.type,
                MPI_COMM_WORLD);
  PMPI_Alltoallv(src.data(), counts.data(), displs.data(), col.type, b.data(), rcounts.data(), rdispls.data(), col.type,
                 MPI_COMM_WORLD);
  EXPECT_EQ(a, b);
  // Alltoallw: byte displacements and a different type per peer (column or plain doubles).
  std::vector<MPI_Datatype> types(static_cast<size_t>(p));
  std::vector<int> wd(static_cast<size_t>(p)), wrd(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    types[static_cast<size_t>(i)] = i % 2 ? MPI_DOUBLE : col.type;
    wd[static_cast<size_t>(i)] = displs[static_cast<size_t>(i)] * 31 * 8;
    wrd[static_cast<size_t>(i)] = rdispls[static_cast<size_t>(i)] * 31 * 8;
  }
  // Peer i sends us its type for rank me: (me % 2 ? double : column); we receive with the same.
  std::vector<MPI_Datatype> rtypes(static_cast<size_t>(p), me % 2 ? MPI_DOUBLE : col.type);
  std::vector<int> wcounts(static_cast<size_t>(p)), wrcounts(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    wcounts[static_cast<size_t>(i)] = counts[static_cast<size_t>(i)] * (i % 2 ? 16 : 1);
    wrcounts[static_cast<size_t>(i)] = rcounts[static_cast<size_t>(i)] * (me % 2 ? 16 : 1);
  }
  std::fill(a.begin(), a.end(), -1.0);
  std::fill(b.begin(), b.end(), -1.0);
  MPI_Alltoallw(src.data(), wcounts.data(), wd.data(), types.data(), a.data(), wrcounts.data(), wrd.data(),
                rtypes.data(), MPI_COMM_WORLD);
  PMPI_Alltoallw(src.data(), wcounts.data(), wd.data(), types.data(), b.data(), wrcounts.data(), wrd.data(),
                 rtypes.data(), MPI_COMM_WORLD);
  EXPECT_EQ(a, b);
}

// Neighbor_alltoallv/w of one column to each side of a ring, against the
// library. On an open (non-periodic) ring the border ranks' missing
// neighbours are MPI_PROC_NULL, whose receive blocks must stay untouched.
void check_neighbor_ring(int periodic) {
  const int p = size_of(), me = rank_of();
  MPI_Comm ring;
  int dims[1] = {p}, periods[1] = {periodic};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  Column col(20, 2, 4);
  const size_t n = 4 * 20 * 2 + 16;
  auto src = pattern(n, 10.0 * me);
  std::vector<double> a(n, -1.0), b(n, -1.0);
  // One column at extents 0 and 1.
  int counts[2] = {1, 1}, displs[2] = {0, 1};
  MPI_Neighbor_alltoallv(src.data(), counts, displs, col.type, a.data(), counts, displs, col.type, ring);
  PMPI_Neighbor_alltoallv(src.data(), counts, displs, col.type, b.data(), counts, displs, col.type, ring);
  EXPECT_EQ(a, b);
  MPI_Aint wd[2] = {0, 78 * 8};
  MPI_Datatype types[2] = {col.type, col.type};
  std::fill(a.begin(), a.end(), -1.0);
  std::fill(b.begin(), b.end(), -1.0);
  MPI_Neighbor_alltoallw(src.data(), counts, wd, types, a.data(), counts, wd, types, ring);
  PMPI_Neighbor_alltoallw(src.data(), counts, wd, types, b.data(), counts, wd, types, ring);
  EXPECT_EQ(a, b);
  MPI_Comm_free(&ring);
}

TEST(Alltoall, NeighborhoodAgreesWithLibrary) { check_neighbor_ring(1); }
TEST(Alltoall, NeighborhoodOnAnOpenRingLeavesProcNullBlocksAlone) { check_neighbor_ring(0); }

TEST(Pack, MatchesLibraryForCommonTypes) {
  Column col(300, 3, 7);  // extent 2096 doubles
  auto src = pattern(4400, 2.0);
  auto ref = library_pack(src.data(), 2, col.type);
  std::vector<char> got(ref.size() + 16, 0);
  int pos = 16;
  ASSERT_EQ(MPI_Pack(src.data(), 2, col.type, got.data(), static_cast<int>(got.size()), &pos, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(pos, static_cast<int>(ref.size()) + 16);
  EXPECT_TRUE(std::equal(ref.begin(), ref.end(), got.begin() + 16));
  std::vector<double> back(4400, 0.0), lib(4400, 0.0);
  pos = 16;
  MPI_Unpack(got.data(), static_cast<int>(got.size()), &pos, back.data(), 2, col.type, MPI_COMM_WORLD);
  pos = 16;
  PMPI_Unpack(got.data(), static_cast<int>(got.size()), &pos, lib.data(), 2, col.type, MPI_COMM_WORLD);
  EXPECT_EQ(back, lib);
}

// One contiguous run (a predefined type, a row of a subarray, one block at an
// offset) is copied by Veneer itself: the same bytes, positions and results
// as the library, on the first call (full rules) and the next (the inline copy).
TEST(Pack, OneRunTypesAreCopiedLikeTheLibrary) {
  auto src = pattern(512, 3.0);
  MPI_Datatype row = MPI_DATATYPE_NULL, offset_block = MPI_DATATYPE_NULL, resized = MPI_DATATYPE_NULL;
  const int sizes[2] = {16, 32}, sub[2] = {1, 32}, start[2] = {5, 0};
  MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &row);
  MPI_Type_commit(&row);
  const int len = 7;
  const MPI_Aint disp = 24 * sizeof(double);
  MPI_Type_create_hindexed(1, &len, &disp, MPI_DOUBLE, &offset_block);
  MPI_Type_commit(&offset_block);
  MPI_Type_create_resized(MPI_INT, 0, sizeof(int), &resized);  // contiguous, size == extent
  MPI_Type_commit(&resized);
  struct Case {
    MPI_Datatype type;
    int count;
  };
  for (const Case& c : {Case{MPI_DOUBLE, 16}, Case{MPI_BYTE, 3}, Case{row, 1}, Case{offset_block, 1},
                        Case{resized, 100}, Case{MPI_DOUBLE, 1}}) {
    for (int round = 0; round < 2; ++round) {
      int bytes = 0;
      PMPI_Pack_size(c.count, c.type, MPI_COMM_WORLD, &bytes);
      std::vector<char> got(static_cast<size_t>(bytes) + 5, 'x'), ref = got;
      int pos = 5, ref_pos = 5;
      ASSERT_EQ(MPI_Pack(src.data(), c.count, c.type, got.data(), static_cast<int>(got.size()), &pos, MPI_COMM_WORLD),
                MPI_SUCCESS);
      PMPI_Pack(src.data(), c.count, c.type, ref.data(), static_cast<int>(ref.size()), &ref_pos, MPI_COMM_WORLD);
      EXPECT_EQ(pos, ref_pos);
      EXPECT_EQ(got, ref);
      std::vector<double> back(512, -1.0), lib(512, -1.0);
      pos = ref_pos = 5;
      ASSERT_EQ(
          MPI_Unpack(got.data(), static_cast<int>(got.size()), &pos, back.data(), c.count, c.type, MPI_COMM_WORLD),
          MPI_SUCCESS);
      PMPI_Unpack(ref.data(), static_cast<int>(ref.size()), &ref_pos, lib.data(), c.count, c.type, MPI_COMM_WORLD);
      EXPECT_EQ(pos, ref_pos);
      EXPECT_EQ(0, std::memcmp(back.data(), lib.data(), back.size() * sizeof(double)));
    }
  }
  // No room: passed through, so the library's own answer (Open MPI reports
  // an error; MPICH 4.0 does not check and writes past outsize, hence the
  // larger allocation than the 64 bytes declared).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::vector<char> small(512);
  int pos = 60, ref_pos = 60;
  const int rc = MPI_Pack(src.data(), 16, MPI_DOUBLE, small.data(), 64, &pos, MPI_COMM_WORLD);
  const int ref_rc = PMPI_Pack(src.data(), 16, MPI_DOUBLE, small.data(), 64, &ref_pos, MPI_COMM_WORLD);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  int cls = 0, ref_cls = 0;
  MPI_Error_class(rc, &cls);
  MPI_Error_class(ref_rc, &ref_cls);
  EXPECT_EQ(cls, ref_cls);
  EXPECT_EQ(pos, ref_pos);
  MPI_Type_free(&row);
  MPI_Type_free(&offset_block);
  MPI_Type_free(&resized);
}

#include <thread>

TEST(P2P, ConcurrentThreadsUnderThreadMultiple) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the library gave no MPI_THREAD_MULTIPLE";
  const int me = rank_of();
  constexpr int kThreads = 4, kRounds = 50;
  // Every thread commits and frees its own types too, racing with the others' lookups.
  std::vector<int> errors(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, me, &errors] {
      for (int r = 0; r < kRounds; ++r) {
        Column col(40 + t, 1 + r % 3, 4);
        auto src = pattern(static_cast<size_t>(4 * (40 + t) + 8), t * 100.0 + r);
        std::vector<double> dst(src.size(), -1.0), ref(src.size(), -1.0);
        MPI_Request q[2];
        const int tag = 1000 + t;
        MPI_Irecv(dst.data(), 1, col.type, me, tag, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(src.data(), 1, col.type, me, tag, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        int pos = 0;
        std::vector<char> packed(src.size() * sizeof(double));
        MPI_Pack(src.data(), 1, col.type, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD);
        pos = 0;
        MPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, ref.data(), 1, col.type, MPI_COMM_WORLD);
        if (dst != ref) ++errors[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[static_cast<size_t>(t)], 0) << "thread " << t;
}

// A repeated sequence of passed sends and receives, as a halo exchange posts
// them (a receive, then a send, per neighbour, each with its own type): every
// message arrives intact, and each type's entry in this thread's front of the
// type cache names the slot of the type asked after it, which the next call
// of the sequence is fetched ahead from (datatypes::front_entry_ahead).
TEST(P2P, RepeatedSequenceOfPassedTypesIsFetchedAhead) {
  const int me = rank_of();
  constexpr int kTypes = 6, kRounds = 5;
  // A live type whose sends Veneer may take over at one element (128 KiB)
  // keeps these calls on the way by their types (p2p_leanly_passes), where
  // the hints are learnt.
  Column takeable(16384);
  std::array<MPI_Datatype, kTypes> types{};
  std::array<std::vector<int>, kTypes> sent, received;
  for (int k = 0; k < kTypes; ++k) {
    MPI_Type_contiguous(k + 2, MPI_INT, &types[k]);  // contiguous: always passed through
    MPI_Type_commit(&types[k]);
    sent[k].resize(static_cast<size_t>(k + 2));
    received[k].resize(static_cast<size_t>(k + 2));
  }
  for (int round = 0; round < kRounds; ++round) {
    std::array<MPI_Request, 2 * kTypes> requests{};
    for (int k = 0; k < kTypes; ++k) {
      std::iota(sent[k].begin(), sent[k].end(), 1000 * round + 100 * k + me);
      std::fill(received[k].begin(), received[k].end(), -1);
      ASSERT_EQ(MPI_Irecv(received[k].data(), 1, types[k], me, k, MPI_COMM_WORLD, &requests[k]), MPI_SUCCESS);
    }
    for (int k = 0; k < kTypes; ++k)
      ASSERT_EQ(MPI_Isend(sent[k].data(), 1, types[k], me, k, MPI_COMM_WORLD, &requests[kTypes + k]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(2 * kTypes, requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
    for (int k = 0; k < kTypes; ++k) EXPECT_EQ(received[k], sent[k]) << "round " << round << ", type " << k;
  }
  // The hints, where these calls took the quick pass-through (not while
  // device memory may be present or a report counts every call).
  using veneer::datatypes::detail::Front;
  using veneer::datatypes::detail::t_front;
  std::array<const Front*, kTypes> entries{};
  bool quick = !veneer::p2p_leanly_passes(1, true);
  for (int k = 0; k < kTypes; ++k) {
    entries[k] = veneer::datatypes::front_entry(t_front, types[k]);
    quick = quick && entries[k] && entries[k]->pass_below[1] > 1 && !entries[k]->noted;
  }
  for (int k = 0; quick && k < kTypes; ++k) {
    // After the last type's receive comes the first one's send; after its send, the next round's first receive.
    const auto expected = static_cast<uint16_t>(entries[(k + 1) % kTypes] - t_front->slots.data());
    EXPECT_EQ(entries[k]->next, expected) << "type " << k;
  }
  for (auto& t : types) MPI_Type_free(&t);
  if (!quick)
    GTEST_SKIP() << "these calls are asked in full here (device memory possible, or a report wanted), or pass "
                    "without a lookup (every type passes: a switch is off)";
}

// The count behind p2p_leanly_passes for nonblocking calls (support/config.h
// g_types_unsettled), exact once the type cache has counted (any commit does),
// and the count below which such calls pass without a lookup.
int64_t unsettled() { return veneer::g_types_unsettled[1].load(); }
int32_t lean_below() { return veneer::g_lean_below[1].load(); }
int32_t passes_below(MPI_Datatype type) {
  return veneer::type_passes_below(veneer::datatypes::lookup(type).get(), true);
}
bool always_passes(MPI_Datatype type) { return passes_below(type) == veneer::datatypes::detail::kAlwaysPasses; }
bool lean_open() {
  const veneer::Config& c = veneer::config();
  return !(veneer::carries_device(c) && veneer::device_byte_down(c));
}

// `count` of `col` through Veneer to this rank, against the same exchange
// past Veneer (PMPI_).
void exchange(const Column& col, int count, double seed) {
  const int me = rank_of();
  MPI_Aint lb = 0, extent = 0;
  MPI_Type_get_extent(col.type, &lb, &extent);
  const size_t span = static_cast<size_t>(count) * static_cast<size_t>(extent) / sizeof(double);
  const std::vector<double> in = pattern(span, seed);
  std::vector<double> out(span, -1.0);
  std::vector<double> want(span, -1.0);
  MPI_Request r[2];
  ASSERT_EQ(MPI_Irecv(out.data(), count, col.type, me, 5, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Isend(in.data(), count, col.type, me, 5, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(2, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Irecv(want.data(), count, col.type, me, 6, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Isend(in.data(), count, col.type, me, 6, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Waitall(2, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(out, want) << count << " elements";
}

// Nonblocking sends and receives go to the library without a lookup of their
// types while every committed derived type would pass at their count; a type
// Veneer may take over counts from its commit to its free, and a type that
// always passes is counted by its size from its commit and settled at its
// first use. Data checked in every state.
TEST(P2P, SendsSkipTheLookupWhileEveryCommittedTypePasses) {
  const veneer::Config& c = veneer::config();
  const bool sends_on = veneer::takes_send(c) && veneer::uses_packers(c);
  Column wide(16, 16, 32);  // blocks of 128 bytes: passes on both libraries by default
  const int64_t committed = unsettled();
  ASSERT_LT(committed, veneer::kTypesRecount) << "the commit counted the types";
  EXPECT_LE(lean_below(), veneer::size_passes_below(16 * 16 * 8, true)) << "by its size until first used";
  const bool wide_passes = always_passes(wide.type);  // its first use: decoded
  const int64_t base = unsettled();
  EXPECT_EQ(committed - base, sends_on && wide_passes ? 1 : 0)
      << "counted by its size from its commit, settled when first used";
  const int32_t base_below = lean_below();
  exchange(wide, 1, 1.0);
  {
    Column narrow(64);  // blocks of one double: taken over where sends are on
    const bool narrow_passes = always_passes(narrow.type);
    EXPECT_EQ(unsettled(), base + (narrow_passes ? 0 : 1));
    if (!narrow_passes) {
      const int32_t below = passes_below(narrow.type);
      EXPECT_EQ(lean_below(), std::min(base_below, below));
      EXPECT_FALSE(veneer::p2p_leanly_passes(lean_below(), true));
      if (lean_below() > 1) EXPECT_EQ(veneer::p2p_leanly_passes(lean_below() - 1, true), lean_open());
      exchange(narrow, below, 2.5);  // the smallest message taken over
    }
    exchange(narrow, 1, 2.0);
    exchange(wide, 1, 3.0);
  }
  EXPECT_EQ(unsettled(), base) << "a freed type is forgotten";
  EXPECT_EQ(lean_below(), base_below);
  EXPECT_TRUE(wide_passes || base > 0) << "a live type that does not always pass is counted";
  if (base == 0) {
    EXPECT_EQ(lean_below(), veneer::datatypes::detail::kAlwaysPasses);
    EXPECT_EQ(veneer::p2p_leanly_passes(1 << 30, true), lean_open());
  }
  exchange(wide, 1, 4.0);
}

// The count below which calls skip the lookup is the least of the live
// types': a larger type that may be taken over lowers it while it lives, and
// a call below it passes whatever its type, one that does not pass included
// (checked on data).
TEST(P2P, TheLeastCountOfTheLiveTypesOpensTheLeanPath) {
  Column small(64);    // 512 bytes
  Column large(2048);  // 16 KiB
  const int32_t small_below = passes_below(small.type);
  const int32_t large_below = passes_below(large.type);
  if (small_below == veneer::datatypes::detail::kAlwaysPasses || large_below >= small_below)
    GTEST_SKIP() << "these types pass at every count here (sends off, or their blocks are not taken over)";
  EXPECT_LE(lean_below(), large_below);
  if (lean_below() == large_below && lean_open()) {
    EXPECT_TRUE(veneer::p2p_leanly_passes(large_below - 1, true));
    EXPECT_FALSE(veneer::p2p_leanly_passes(large_below, true));
  }
  exchange(small, std::max(1, large_below - 1), 5.0);  // passes (below both types' counts)
  exchange(large, large_below, 6.0);                   // may be taken over
  const int32_t with_large = lean_below();
  {
    Column larger(8192);  // 64 KiB: one element may be taken over
    EXPECT_LE(lean_below(), passes_below(larger.type));
    EXPECT_LE(lean_below(), with_large);
    exchange(larger, 1, 7.0);
  }
  EXPECT_EQ(lean_below(), with_large) << "the freed type no longer holds the count down";
  exchange(small, small_below, 8.0);
}

// Every other kind of send (and Sendrecv, Sendrecv_replace) of a type Veneer
// may take over, at one element (which passes without a lookup while no
// live type is taken over at that count) and at the smallest count taken
// over: the data arrive as a hand-written gather of the strided elements
// says.
TEST(P2P, EverySendKindEitherSideOfTheLeastCount) {
  const int me = rank_of();
  Column col(64);  // 64 doubles, 24 bytes apart: an element spans 190 doubles
  constexpr size_t kSpan = 190;
  const int32_t below = passes_below(col.type);
  std::vector<int> counts{1};
  if (below > 1 && below <= 4096) counts.push_back(below);
  std::vector<char> attached(size_t{8} << 20);
  ASSERT_EQ(MPI_Buffer_attach(attached.data(), static_cast<int>(attached.size())), MPI_SUCCESS);
  for (int count : counts) {
    const size_t span = static_cast<size_t>(count) * kSpan;
    const std::vector<double> in = pattern(span, 7.0 + count);
    std::vector<double> want(span, -1.0);
    for (size_t e = 0; e < static_cast<size_t>(count); ++e)
      for (size_t i = 0; i < 64; ++i) want[e * kSpan + 3 * i] = in[e * kSpan + 3 * i];
    for (int kind = 0; kind < 8; ++kind) {
      std::vector<double> out(span, -1.0);
      MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      const int tag = 40 + kind;
      if (kind < 6) ASSERT_EQ(MPI_Irecv(out.data(), count, col.type, me, tag, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
      int rc = MPI_SUCCESS;
      switch (kind) {
        case 0: rc = MPI_Ssend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD); break;
        case 1: rc = MPI_Rsend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD); break;
        case 2: rc = MPI_Bsend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD); break;
        case 3: rc = MPI_Issend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD, &r[1]); break;
        case 4: rc = MPI_Ibsend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD, &r[1]); break;
        case 5: rc = MPI_Irsend(in.data(), count, col.type, me, tag, MPI_COMM_WORLD, &r[1]); break;
        case 6:
          rc = MPI_Sendrecv(in.data(), count, col.type, me, tag, out.data(), count, col.type, me, tag, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE);
          break;
        default:
          out = in;  // received in place: the strided elements come back to where they were sent from
          rc = MPI_Sendrecv_replace(out.data(), count, col.type, me, tag, me, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          break;
      }
      ASSERT_EQ(rc, MPI_SUCCESS) << "kind " << kind << ", " << count << " elements";
      ASSERT_EQ(MPI_Waitall(2, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(out, kind == 7 ? in : want) << "kind " << kind << ", " << count << " elements";
    }
  }
  void* detached = nullptr;
  int detached_size = 0;
  MPI_Buffer_detach(&detached, &detached_size);
}

// A change of the configuration has every type counted again under the new
// rules at the type cache's next miss: a type settled under the built-in
// largest block is counted once a larger block may be taken over, and
// settled again when that goes.
TEST(P2P, AChangedConfigurationCountsTheTypesAgain) {
  const veneer::Config& c = veneer::config();
  if (!veneer::takes_send(c) || !veneer::uses_packers(c)) GTEST_SKIP() << "sends are off here: every type passes";
  if (getenv("VENEER_P2P_MAX_BLOCK") != nullptr) GTEST_SKIP() << "the launcher set VENEER_P2P_MAX_BLOCK";
  Column wide(16, 16, 32);  // blocks of 128 bytes
  if (!always_passes(wide.type)) GTEST_SKIP() << "128-byte blocks may be taken over here already";
  const int64_t base = unsettled();
  setenv("VENEER_P2P_MAX_BLOCK", "1M", 1);
  veneer::reload_config();
  EXPECT_GE(unsettled(), veneer::kTypesRecount);
  EXPECT_EQ(lean_below(), 0) << "no call skips the lookup until the types are counted again";
  EXPECT_FALSE(veneer::p2p_leanly_passes(1, true));
  {
    Column probe(4, 16, 32);  // its commit has the type cache count again
    EXPECT_GE(unsettled(), base + 2) << "the wide type and the probe, both takeable now";
  }
  unsetenv("VENEER_P2P_MAX_BLOCK");
  veneer::reload_config();
  {
    Column probe(4, 16, 32);
    EXPECT_TRUE(always_passes(probe.type));
    EXPECT_EQ(unsettled(), base);
  }
  EXPECT_EQ(unsettled(), base);
}

// A strided type whose sends a switch leaves to the library (VENEER_DISABLE=1
// or VENEER_P2P=0: CMake runs this binary once with VENEER_DISABLE=1) is not
// counted, so its calls pass without a lookup; where device memory may be
// present, it is in this thread's front after its first call, with a rule
// that passes every later call on the quick path. (The full path once returned before the
// lookup that enters it, so every such call went the full way: a halo
// exchange under VENEER_DISABLE=1 ran at 0.84-0.89 of the library at 1 rank.)
TEST(P2P, ATypeASwitchPassesIsPassedQuicklyAfterItsFirstCall) {
  const veneer::Config& c = veneer::config();
  if (veneer::takes_send(c)) GTEST_SKIP() << "sends are on here (run with VENEER_DISABLE=1)";
  const int me = rank_of();
  Column column(64);  // 64 doubles 24 bytes apart
  for (int round = 0; round < 3; ++round) {
    const std::vector<double> in = pattern(64 * 3, 10.0 * round + me);
    std::vector<double> out(64 * 3, -1.0), want(64 * 3, -1.0);
    for (size_t i = 0; i < 64; ++i) want[i * 3] = in[i * 3];
    MPI_Request r[2];
    ASSERT_EQ(MPI_Irecv(out.data(), 1, column.type, me, 3, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(in.data(), 1, column.type, me, 3, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(2, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(out, want) << "round " << round;
  }
  // No type is counted while sends are off: every call passes without a
  // lookup, unless device memory may be here; then by the type's front entry.
  if (lean_open()) {
    EXPECT_TRUE(veneer::p2p_leanly_passes(1 << 30, true));
    EXPECT_TRUE(veneer::p2p_leanly_passes(1 << 30, false));
    return;
  }
  const veneer::datatypes::detail::Front* entry =
      veneer::datatypes::front_entry(veneer::datatypes::detail::t_front, column.type);
  ASSERT_NE(entry, nullptr) << "the type is not in this thread's front";
  EXPECT_GT(entry->pass_below[0], 1);
  EXPECT_GT(entry->pass_below[1], 1);
}
