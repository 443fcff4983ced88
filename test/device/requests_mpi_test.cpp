// SPDX-License-Identifier: BSD-3-Clause
// Requests of device receives and sends: many in flight, MPI_Request_get_status,
// MPI_Request_free, MPI_Cancel, and probes (MPI_Probe, MPI_Mprobe + Mrecv/Imrecv).
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

// Several receives into device memory in flight at once, matched in an order
// other than their posting order, completed by Waitany and Testsome.
TEST_F(Device, ManyDeviceReceivesInFlight) {
  TypeSet set;
  Ring r;
  const int k = static_cast<int>(set.types.size());
  std::vector<std::unique_ptr<Typed>> src, dst;
  std::vector<std::vector<char>> want;
  std::vector<MPI_Request> recvs(static_cast<size_t>(k)), sends(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) {
    const TestType& tt = set.types[static_cast<size_t>(i)];
    src.push_back(std::make_unique<Typed>(tt.type, tt.count, data_seed(r.me, 110 + i)));
    dst.push_back(std::make_unique<Typed>(tt.type, tt.count, sentinel_seed(r.me, 110 + i)));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 110 + i));
    want.push_back(
        library_unpacked(dst.back()->image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type)));
    ASSERT_EQ(
        MPI_Irecv(dst.back()->dev(), tt.count, tt.type, r.left, i, MPI_COMM_WORLD, &recvs[static_cast<size_t>(i)]),
        MPI_SUCCESS);
  }
  for (int i = k - 1; i >= 0; --i) {
    const TestType& tt = set.types[static_cast<size_t>(i)];
    ASSERT_EQ(MPI_Isend(src[static_cast<size_t>(i)]->dev(), tt.count, tt.type, r.right, i, MPI_COMM_WORLD,
                        &sends[static_cast<size_t>(i)]),
              MPI_SUCCESS);
  }
  // Half the receives by Waitany, the rest by Testsome.
  std::vector<bool> seen(static_cast<size_t>(k), false);
  for (int done = 0; done < k / 2; ++done) {
    int idx = MPI_UNDEFINED;
    MPI_Status st;
    ASSERT_EQ(MPI_Waitany(k, recvs.data(), &idx, &st), MPI_SUCCESS);
    ASSERT_GE(idx, 0);
    EXPECT_EQ(st.MPI_TAG, idx);
    EXPECT_TRUE(same_bytes(dst[static_cast<size_t>(idx)]->download(), want[static_cast<size_t>(idx)])) << idx;
    seen[static_cast<size_t>(idx)] = true;
  }
  for (int left = k - k / 2; left > 0;) {
    int out = 0;
    std::vector<int> idx(static_cast<size_t>(k));
    std::vector<MPI_Status> sts(static_cast<size_t>(k));
    ASSERT_EQ(MPI_Testsome(k, recvs.data(), &out, idx.data(), sts.data()), MPI_SUCCESS);
    ASSERT_NE(out, MPI_UNDEFINED);
    for (int j = 0; j < out; ++j) {
      const auto i = static_cast<size_t>(idx[static_cast<size_t>(j)]);
      EXPECT_FALSE(seen[i]);
      seen[i] = true;
      EXPECT_EQ(sts[static_cast<size_t>(j)].MPI_TAG, static_cast<int>(i));
      EXPECT_TRUE(same_bytes(dst[i]->download(), want[i])) << i;
    }
    left -= out;
  }
  MPI_Waitall(k, sends.data(), MPI_STATUSES_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
}

// MPI_Request_get_status saying "complete" lets the user read the buffer
// before the request is freed by a completion call.
TEST_F(Device, RequestGetStatusUnpacksBeforeWait) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed src(tt.type, tt.count, data_seed(r.me, 120));
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 120));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 120));
    const std::vector<char> want =
        library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Request q[2];
    ASSERT_EQ(MPI_Irecv(dst.dev(), tt.count, tt.type, r.left, 3, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 3, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    int flag = 0;
    MPI_Status st;
    while (!flag) ASSERT_EQ(MPI_Request_get_status(q[0], &flag, &st), MPI_SUCCESS);
    EXPECT_EQ(st.MPI_SOURCE, r.left);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "after MPI_Request_get_status";
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "after MPI_Waitall";
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// A device send whose request is freed at once: Veneer keeps the packed
// bytes until the library is done with them.
TEST_F(Device, RequestFreeOfADeviceSend) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed src(tt.type, tt.count, data_seed(r.me, 130));
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 130));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 130));
    const std::vector<char> want =
        library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Request q;
    ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 4, MPI_COMM_WORLD, &q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
    EXPECT_EQ(q, MPI_REQUEST_NULL);
    ASSERT_EQ(MPI_Recv(dst.dev(), tt.count, tt.type, r.left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(dst.download(), want));
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// A cancelled device receive leaves the buffer as it was.
TEST_F(Device, CancelledDeviceReceive) {
  TypeSet set;
  const int me = rank_of();
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed dst(tt.type, tt.count, sentinel_seed(me, 140));
    MPI_Request q;
    ASSERT_EQ(MPI_Irecv(dst.dev(), tt.count, tt.type, me, 999, MPI_COMM_WORLD, &q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Cancel(&q), MPI_SUCCESS);
    MPI_Status st;
    ASSERT_EQ(MPI_Wait(&q, &st), MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    EXPECT_TRUE(cancelled);
    EXPECT_TRUE(same_bytes(dst.download(), dst.image()));
  }
}

// The size of a message sent from device memory, probed before it is received.
TEST_F(Device, ProbeThenReceiveIntoDevice) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed src(tt.type, tt.count, data_seed(r.me, 150));
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 150));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 150));
    const std::vector<char> want =
        library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Request q;
    ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 6, MPI_COMM_WORLD, &q), MPI_SUCCESS);
    MPI_Status st;
    int flag = 0;
    while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &flag, &st);
    EXPECT_EQ(st.MPI_SOURCE, r.left);
    int n = -1, e = -1;
    MPI_Get_count(&st, tt.type, &n);
    EXPECT_EQ(n, tt.count);
    MPI_Probe(r.left, 6, MPI_COMM_WORLD, &st);
    MPI_Get_elements(&st, MPI_BYTE, &e);
    EXPECT_EQ(e, tt.count * type_size(tt.type));
    ASSERT_EQ(MPI_Recv(dst.dev(), n, tt.type, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    EXPECT_TRUE(same_bytes(dst.download(), want));
  }
}

// Matched probe, then MPI_Mrecv / MPI_Imrecv into device memory: the same
// bytes and status as the library's matched receive into a host copy.
TEST_F(Device, MatchedProbeThenReceiveIntoDevice) {
  TypeSet set;
  Ring r;
  int salt = 240;
  for (TestType& tt : set.types) {
    for (int nonblocking = 0; nonblocking < 2; ++nonblocking, ++salt) {
      SCOPED_TRACE(tt.name + (nonblocking ? " Imrecv" : " Mrecv"));
      Typed src(tt.type, tt.count, data_seed(r.me, salt));
      Typed dst(tt.type, tt.count, sentinel_seed(r.me, salt));
      Typed ref(tt.type, tt.count, sentinel_seed(r.me, salt));
      // Two messages from the left: the first into device memory through
      // Veneer, the second into a host copy through the library.
      MPI_Request q[2];
      ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 7, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
      ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 7, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
      MPI_Message m;
      MPI_Status st, ref_st;
      if (nonblocking) {
        int flag = 0;
        while (!flag) MPI_Improbe(r.left, 7, MPI_COMM_WORLD, &flag, &m, &st);
        MPI_Request rq;
        ASSERT_EQ(MPI_Imrecv(dst.dev(), tt.count, tt.type, &m, &rq), MPI_SUCCESS);
        EXPECT_EQ(m, MPI_MESSAGE_NULL);
        ASSERT_EQ(MPI_Wait(&rq, &st), MPI_SUCCESS);
      } else {
        ASSERT_EQ(MPI_Mprobe(r.left, 7, MPI_COMM_WORLD, &m, &st), MPI_SUCCESS);
        ASSERT_EQ(MPI_Mrecv(dst.dev(), tt.count, tt.type, &m, &st), MPI_SUCCESS);
        EXPECT_EQ(m, MPI_MESSAGE_NULL);
      }
      ASSERT_EQ(PMPI_Mprobe(r.left, 7, MPI_COMM_WORLD, &m, &ref_st), MPI_SUCCESS);
      ASSERT_EQ(PMPI_Mrecv(ref.host(), tt.count, tt.type, &m, &ref_st), MPI_SUCCESS);
      MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
      EXPECT_TRUE(same_bytes(dst.download(), ref.image()));
      EXPECT_EQ(st.MPI_SOURCE, ref_st.MPI_SOURCE);
      EXPECT_EQ(st.MPI_TAG, ref_st.MPI_TAG);
      int n = -1, ref_n = -2;
      MPI_Get_count(&st, tt.type, &n);
      PMPI_Get_count(&ref_st, tt.type, &ref_n);
      EXPECT_EQ(n, ref_n);
    }
  }
  // MPI_PROC_NULL: the message is MPI_MESSAGE_NO_PROC; the buffer stays untouched.
  Typed dst(MPI_DOUBLE, 8, sentinel_seed(r.me, salt));
  MPI_Message m;
  MPI_Status st;
  ASSERT_EQ(MPI_Mprobe(MPI_PROC_NULL, 7, MPI_COMM_WORLD, &m, &st), MPI_SUCCESS);
  EXPECT_EQ(m, MPI_MESSAGE_NO_PROC);
  ASSERT_EQ(MPI_Mrecv(dst.dev(), 8, MPI_DOUBLE, &m, &st), MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_TRUE(same_bytes(dst.download(), dst.image()));
}

}  // namespace
}  // namespace veneer::test
