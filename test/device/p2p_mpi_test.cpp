// SPDX-License-Identifier: BSD-3-Clause
// Point to point with device buffers, in a ring (each rank sends to the right,
// receives from the left): every completion call, blocking sends and receives,
// Sendrecv(_replace), statuses of partial messages, MPI_PROC_NULL peers.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

TEST_F(Device, IsendIrecvRingEveryCompletionCall) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    int round = 0;
    for (Completion how : kCompletions) {
      SCOPED_TRACE(round);
      const int salt = 10 + round;
      Typed src(tt.type, tt.count, data_seed(r.me, salt));
      Typed dst(tt.type, tt.count, sentinel_seed(r.me, salt));
      // What the left neighbour sends, made here from its seed.
      Typed from_left(tt.type, tt.count, data_seed(r.left, salt));
      const std::vector<char> want =
          library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
      MPI_Request reqs[2];
      // Odd rounds receive from anyone, with any tag.
      const bool any = round % 2 == 1;
      ASSERT_EQ(MPI_Irecv(dst.dev(), tt.count, tt.type, any ? MPI_ANY_SOURCE : r.left, any ? MPI_ANY_TAG : round,
                          MPI_COMM_WORLD, &reqs[0]),
                MPI_SUCCESS);
      ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, round, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
      MPI_Status st;
      complete(how, reqs, &st);
      EXPECT_EQ(reqs[0], MPI_REQUEST_NULL);
      EXPECT_EQ(reqs[1], MPI_REQUEST_NULL);
      EXPECT_EQ(st.MPI_SOURCE, r.left);
      EXPECT_EQ(st.MPI_TAG, round);
      int n = -1;
      MPI_Get_count(&st, tt.type, &n);
      EXPECT_EQ(n, tt.count);
      EXPECT_TRUE(same_bytes(dst.download(), want));
      // The send buffer is the sender's to keep.
      EXPECT_TRUE(same_bytes(src.download(), src.image()));
      ++round;
      // Rounds must not overtake each other with ANY_SOURCE/ANY_TAG.
      MPI_Barrier(MPI_COMM_WORLD);
    }
    // No statuses asked for: Veneer still needs the byte count to unpack.
    Typed src(tt.type, tt.count, data_seed(r.me, 19));
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 19));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 19));
    const std::vector<char> want =
        library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Request reqs[2];
    ASSERT_EQ(MPI_Irecv(dst.dev(), tt.count, tt.type, r.left, 19, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(src.dev(), tt.count, tt.type, r.right, 19, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "MPI_STATUSES_IGNORE";
  }
}

// Blocking sends (Send, Ssend) and receives over every pairing of device and
// host buffers. Even ranks send first, odd ranks receive first.
TEST_F(Device, BlockingSendRecvRingHostAndDeviceSides) {
  Ring r;
  if (r.p < 2) GTEST_SKIP() << "needs 2 ranks";
  TypeSet set;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    int round = 0;
    for (bool ssend : {false, true}) {
      for (int sides = 0; sides < 3; ++sides) {  // 0: dev->dev, 1: dev->host, 2: host->dev
        SCOPED_TRACE(round);
        const int salt = 30 + round;
        const bool send_dev = sides != 2, recv_dev = sides != 1;
        Typed src(tt.type, tt.count, data_seed(r.me, salt));
        Typed dst(tt.type, tt.count, sentinel_seed(r.me, salt));
        Typed from_left(tt.type, tt.count, data_seed(r.left, salt));
        const std::vector<char> want =
            library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
        void* sbuf = send_dev ? src.dev() : src.host();
        void* rbuf = recv_dev ? dst.dev() : dst.host();
        MPI_Status st;
        auto send = [&] {
          return ssend ? MPI_Ssend(sbuf, tt.count, tt.type, r.right, round, MPI_COMM_WORLD)
                       : MPI_Send(sbuf, tt.count, tt.type, r.right, round, MPI_COMM_WORLD);
        };
        auto recv = [&] { return MPI_Recv(rbuf, tt.count, tt.type, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st); };
        if (r.me % 2 == 0) {
          ASSERT_EQ(send(), MPI_SUCCESS);
          ASSERT_EQ(recv(), MPI_SUCCESS);
        } else {
          ASSERT_EQ(recv(), MPI_SUCCESS);
          ASSERT_EQ(send(), MPI_SUCCESS);
        }
        EXPECT_EQ(st.MPI_SOURCE, r.left);
        EXPECT_EQ(st.MPI_TAG, round);
        int n = -1;
        MPI_Get_count(&st, tt.type, &n);
        EXPECT_EQ(n, tt.count);
        EXPECT_TRUE(same_bytes(recv_dev ? dst.download() : dst.image(), want));
        ++round;
        MPI_Barrier(MPI_COMM_WORLD);
      }
    }
  }
}

TEST_F(Device, SendrecvHostAndDeviceSides) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    for (int sides = 0; sides < 3; ++sides) {  // 0: dev->dev, 1: dev->host, 2: host->dev
      SCOPED_TRACE(sides);
      const int salt = 40 + sides;
      const bool send_dev = sides != 2, recv_dev = sides != 1;
      Typed src(tt.type, tt.count, data_seed(r.me, salt));
      Typed dst(tt.type, tt.count, sentinel_seed(r.me, salt));
      Typed from_left(tt.type, tt.count, data_seed(r.left, salt));
      const std::vector<char> want =
          library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
      MPI_Status st;
      ASSERT_EQ(MPI_Sendrecv(send_dev ? src.dev() : src.host(), tt.count, tt.type, r.right, sides,
                             recv_dev ? dst.dev() : dst.host(), tt.count, tt.type, r.left, sides, MPI_COMM_WORLD, &st),
                MPI_SUCCESS);
      EXPECT_EQ(st.MPI_SOURCE, r.left);
      EXPECT_EQ(st.MPI_TAG, sides);
      int n = -1;
      MPI_Get_count(&st, tt.type, &n);
      EXPECT_EQ(n, tt.count);
      EXPECT_TRUE(same_bytes(recv_dev ? dst.download() : dst.image(), want));
    }
  }
}

TEST_F(Device, SendrecvReplace) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed buf(tt.type, tt.count, data_seed(r.me, 50));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 50));
    // The type's bytes are replaced by the left neighbour's; the gaps keep ours.
    const std::vector<char> want =
        library_unpacked(buf.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    MPI_Status st;
    ASSERT_EQ(MPI_Sendrecv_replace(buf.dev(), tt.count, tt.type, r.right, 5, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                   MPI_COMM_WORLD, &st),
              MPI_SUCCESS);
    EXPECT_EQ(st.MPI_SOURCE, r.left);
    EXPECT_EQ(st.MPI_TAG, 5);
    EXPECT_TRUE(same_bytes(buf.download(), want));
  }
}

// A receive larger than the message: the data, MPI_Get_count and
// MPI_Get_elements must be what the library gives for a host receive of the
// same message. Whole instances, and a run of basic elements that ends inside one.
TEST_F(Device, PartialMessagesStatusAsTheLibrary) {
  Ring r;
  TypeSet set;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    if (tt.count < 2) continue;
    const int posted = tt.count, sent = tt.count / 2;
    // The type's one basic type, for the message that ends inside an instance
    // (structs have several: only whole instances for them).
    MPI_Datatype basic = MPI_DATATYPE_NULL;
    if (tt.name == "vector" || tt.name == "subarray" || tt.name == "negative_stride" || tt.name == "double")
      basic = MPI_DOUBLE;
    else if (tt.name == "indexed" || tt.name == "int_x7") basic = MPI_INT;
    const int elements =
        basic == MPI_DATATYPE_NULL ? 0 : (sent * type_size(tt.type)) / type_size(basic) + 1;  // one into the next
    for (int shape = 0; shape < (basic == MPI_DATATYPE_NULL ? 1 : 2); ++shape) {
      SCOPED_TRACE(shape);
      const int salt = 60 + shape;
      Typed src(tt.type, tt.count, data_seed(r.me, salt));
      const std::vector<char> packed = library_pack(src.host(), tt.count, tt.type);
      // shape 0: `sent` instances of the type from the device; 1: `elements` basic elements from host memory.
      auto send_ours = [&](MPI_Request* q) {
        return shape == 0 ? MPI_Isend(src.dev(), sent, tt.type, r.right, 7, MPI_COMM_WORLD, q)
                          : MPI_Isend(packed.data(), elements, basic, r.right, 7, MPI_COMM_WORLD, q);
      };
      auto send_ref = [&](MPI_Request* q) {
        return shape == 0 ? PMPI_Isend(src.host(), sent, tt.type, r.right, 8, MPI_COMM_WORLD, q)
                          : PMPI_Isend(packed.data(), elements, basic, r.right, 8, MPI_COMM_WORLD, q);
      };
      // Veneer: a device receive buffer.
      Typed dst(tt.type, posted, sentinel_seed(r.me, salt));
      MPI_Request q[2];
      ASSERT_EQ(MPI_Irecv(dst.dev(), posted, tt.type, r.left, 7, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
      ASSERT_EQ(send_ours(&q[1]), MPI_SUCCESS);
      MPI_Status st;
      complete(Completion::waitall, q, &st);
      // The library alone: host buffers.
      Typed ref(tt.type, posted, sentinel_seed(r.me, salt));
      MPI_Request rq[2];
      PMPI_Irecv(ref.host(), posted, tt.type, r.left, 8, MPI_COMM_WORLD, &rq[0]);
      send_ref(&rq[1]);
      MPI_Status rst[2];
      PMPI_Waitall(2, rq, rst);
      int n = -2, rn = -3, e = -2, re = -3;
      MPI_Get_count(&st, tt.type, &n);
      PMPI_Get_count(&rst[0], tt.type, &rn);
      MPI_Get_elements(&st, tt.type, &e);
      PMPI_Get_elements(&rst[0], tt.type, &re);
      EXPECT_EQ(n, rn);
      EXPECT_EQ(e, re);
      EXPECT_EQ(st.MPI_SOURCE, rst[0].MPI_SOURCE);
      EXPECT_EQ(st.MPI_TAG, 7);
      EXPECT_TRUE(same_bytes(dst.download(), ref.image()));

      // The same with a blocking receive.
      dst.sync();
      MPI_Request sq;
      ASSERT_EQ(send_ours(&sq), MPI_SUCCESS);
      ASSERT_EQ(MPI_Recv(dst.dev(), posted, tt.type, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st), MPI_SUCCESS);
      MPI_Wait(&sq, MPI_STATUS_IGNORE);
      MPI_Get_count(&st, tt.type, &n);
      MPI_Get_elements(&st, tt.type, &e);
      EXPECT_EQ(n, rn);
      EXPECT_EQ(e, re);
      EXPECT_TRUE(same_bytes(dst.download(), ref.image()));
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
}

TEST_F(Device, ProcNullPeers) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed buf(tt.type, tt.count, data_seed(r.me, 70));
    const std::vector<char> untouched = buf.image();
    auto check_null_status = [&](const MPI_Status& st, const char* call) {
      EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL) << call;
      EXPECT_EQ(st.MPI_TAG, MPI_ANY_TAG) << call;
      int n = -1;
      MPI_Get_count(&st, tt.type, &n);
      EXPECT_EQ(n, 0) << call;
    };
    MPI_Status st;
    EXPECT_EQ(MPI_Send(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(MPI_Ssend(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(MPI_Recv(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    check_null_status(st, "MPI_Recv");
    MPI_Request q[2];
    EXPECT_EQ(MPI_Irecv(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    EXPECT_EQ(MPI_Isend(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    complete(Completion::waitall, q, &st);
    {
      // MPICH 4.0's Waitall reports source 0, tag 0 for a PROC_NULL receive:
      // the status must be the library's own, whatever it is.
      MPI_Request rq[2];
      MPI_Status rst[2];
      std::memset(rst, 0x5a, sizeof rst);
      char none = 0;
      PMPI_Irecv(&none, 0, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq[0]);
      PMPI_Isend(&none, 0, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &rq[1]);
      PMPI_Waitall(2, rq, rst);
      EXPECT_EQ(st.MPI_SOURCE, rst[0].MPI_SOURCE);
      EXPECT_EQ(st.MPI_TAG, rst[0].MPI_TAG);
      int n = -1;
      MPI_Get_count(&st, tt.type, &n);
      EXPECT_EQ(n, 0);
    }
    EXPECT_EQ(
        MPI_Sendrecv_replace(buf.dev(), tt.count, tt.type, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st),
        MPI_SUCCESS);
    check_null_status(st, "MPI_Sendrecv_replace");
    EXPECT_TRUE(same_bytes(buf.download(), untouched));

    // Sendrecv with one side PROC_NULL: a ring that is open between the last rank and rank 0.
    const int dest = r.me == r.p - 1 ? MPI_PROC_NULL : r.right;
    const int source = r.me == 0 ? MPI_PROC_NULL : r.left;
    Typed dst(tt.type, tt.count, sentinel_seed(r.me, 70));
    Typed from_left(tt.type, tt.count, data_seed(r.left, 70));
    const std::vector<char> want =
        source == MPI_PROC_NULL
            ? dst.image()
            : library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
    ASSERT_EQ(MPI_Sendrecv(buf.dev(), tt.count, tt.type, dest, 2, dst.dev(), tt.count, tt.type, source, 2,
                           MPI_COMM_WORLD, &st),
              MPI_SUCCESS);
    if (source == MPI_PROC_NULL) check_null_status(st, "MPI_Sendrecv");
    EXPECT_TRUE(same_bytes(dst.download(), want));

    // Sendrecv_replace on the same open ring: rank 0 keeps its bytes.
    Typed rep(tt.type, tt.count, data_seed(r.me, 71));
    Typed rep_left(tt.type, tt.count, data_seed(r.left, 71));
    const std::vector<char> rep_want =
        source == MPI_PROC_NULL
            ? rep.image()
            : library_unpacked(rep.image(), tt.type, tt.count, library_pack(rep_left.host(), tt.count, tt.type));
    ASSERT_EQ(MPI_Sendrecv_replace(rep.dev(), tt.count, tt.type, dest, 3, source, 3, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    if (source == MPI_PROC_NULL) check_null_status(st, "MPI_Sendrecv_replace, open ring");
    EXPECT_TRUE(same_bytes(rep.download(), rep_want));
  }
}

}  // namespace
}  // namespace veneer::test
