// SPDX-License-Identifier: BSD-3-Clause
// Device messages at the edges: zero instances, large odd sizes across chunk
// boundaries, truncation errors, two threads at once, and a type freed while a
// receive that uses it is pending.
// Part of device_mpi_test: the shared helpers and the fixture are in device_mpi.h.
#include <thread>
#include <vector>

#include "test/device/device_mpi.h"

namespace veneer::test {
namespace {

// Zero instances: nothing moves, nothing is touched, the status says 0.
TEST_F(Device, ZeroCountMessagesAndPacks) {
  TypeSet set;
  Ring r;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed buf(tt.type, tt.count, data_seed(r.me, 160));
    MPI_Request q[2];
    ASSERT_EQ(MPI_Irecv(buf.dev(), 0, tt.type, r.left, 9, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(buf.dev(), 0, tt.type, r.right, 9, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    MPI_Status st;
    complete(Completion::waitall, q, &st);
    int n = -1;
    MPI_Get_count(&st, tt.type, &n);
    EXPECT_EQ(n, 0);
    EXPECT_EQ(st.MPI_SOURCE, r.left);
    ASSERT_EQ(MPI_Sendrecv(buf.dev(), 0, tt.type, r.right, 10, buf.dev(), 0, tt.type, r.left, 10, MPI_COMM_WORLD, &st),
              MPI_SUCCESS);
    MPI_Get_count(&st, tt.type, &n);
    EXPECT_EQ(n, 0);
    char packed[8] = {};
    int pos = 3;
    EXPECT_EQ(MPI_Pack(buf.dev(), 0, tt.type, packed, 8, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, 3);
    EXPECT_EQ(MPI_Unpack(packed, 8, &pos, buf.dev(), 0, tt.type, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_EQ(pos, 3);
    EXPECT_TRUE(same_bytes(buf.download(), buf.image()));
  }
}

// Messages of tens and hundreds of KiB whose sizes are no multiple of a chunk
// and whose chunk boundaries fall inside instances and blocks.
TEST_F(Device, LargeOddSizedMessages) {
  Ring r;
  struct Big {
    const char* name;
    MPI_Datatype type;
    int count;
  };
  MPI_Datatype vec, st, idx, big_vec;
  MPI_Type_vector(1001, 3, 7, MPI_DOUBLE, &vec);  // 24024 bytes
  const int sblocks[] = {1, 1, 3};
  const MPI_Aint sdispls[] = {0, 8, 16};
  const MPI_Datatype stypes[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
  MPI_Type_create_struct(3, sblocks, sdispls, stypes, &st);  // 15 bytes of 24
  const int blocks[] = {3, 1, 4, 1, 5}, displs[] = {0, 4, 7, 13, 20};
  MPI_Type_indexed(5, blocks, displs, MPI_INT, &idx);  // 56 bytes of 100
  MPI_Type_vector(11001, 3, 7, MPI_DOUBLE, &big_vec);  // 264024 bytes: above the one-shot limit
  for (MPI_Datatype* t : {&vec, &st, &idx, &big_vec}) MPI_Type_commit(t);
  const Big cases[] = {{"vector", vec, 1}, {"struct", st, 1500}, {"indexed", idx, 600}, {"big_vector", big_vec, 1}};
  int salt = 170;
  for (const Big& b : cases) {
    SCOPED_TRACE(b.name);
    // Passed through, the host-to-device receive is MPICH's own receive of a
    // byte message into a struct with gaps, which MPICH 4.0.2 wrongly truncates above ~8 KiB.
    if (mode() == Mode::refused_cuda_aware && is_mpich() && b.type == st) continue;
    Typed src(b.type, b.count, data_seed(r.me, salt));
    Typed dst(b.type, b.count, sentinel_seed(r.me, salt));
    Typed from_left(b.type, b.count, data_seed(r.left, salt));
    const std::vector<char> mine = library_pack(src.host(), b.count, b.type);
    const std::vector<char> want =
        library_unpacked(dst.image(), b.type, b.count, library_pack(from_left.host(), b.count, b.type));
    // Device to device.
    MPI_Request q[2];
    ASSERT_EQ(MPI_Irecv(dst.dev(), b.count, b.type, r.left, 11, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(src.dev(), b.count, b.type, r.right, 11, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "Isend/Irecv";
    // Device to host and host to device.
    Typed hdst(b.type, b.count, sentinel_seed(r.me, salt));
    ASSERT_EQ(MPI_Sendrecv(src.dev(), b.count, b.type, r.right, 12, hdst.host(), b.count, b.type, r.left, 12,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(hdst.image(), want)) << "device -> host";
    dst.sync();
    ASSERT_EQ(MPI_Sendrecv(src.host(), b.count, b.type, r.right, 13, dst.dev(), b.count, b.type, r.left, 13,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(dst.download(), want)) << "host -> device";
    // Pack and unpack, device typed and host packed.
    std::vector<char> packed(mine.size());
    int pos = 0;
    ASSERT_EQ(
        MPI_Pack(src.dev(), b.count, b.type, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD),
        MPI_SUCCESS);
    EXPECT_EQ(pos, static_cast<int>(mine.size()));
    EXPECT_TRUE(same_bytes(packed, mine)) << "MPI_Pack";
    Typed udst(b.type, b.count, sentinel_seed(r.me, salt + 1));
    const std::vector<char> uwant = library_unpacked(udst.image(), b.type, b.count, mine);
    pos = 0;
    ASSERT_EQ(MPI_Unpack(mine.data(), static_cast<int>(mine.size()), &pos, udst.dev(), b.count, b.type, MPI_COMM_WORLD),
              MPI_SUCCESS);
    EXPECT_TRUE(same_bytes(udst.download(), uwant)) << "MPI_Unpack";
    ++salt;
  }
  for (MPI_Datatype* t : {&vec, &st, &idx, &big_vec}) MPI_Type_free(t);
}

// A receive smaller than the message: the library's error class, under MPI_ERRORS_RETURN.
TEST_F(Device, TruncationReportedAsTheLibrary) {
  Ring r;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // MPICH 4.0 raises errors of MPI_Wait on MPI_COMM_WORLD, not on the request's communicator.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Datatype vec;
  MPI_Type_vector(16, 2, 5, MPI_DOUBLE, &vec);
  MPI_Type_commit(&vec);
  Typed src(vec, 6, data_seed(r.me, 180));
  Typed dst(vec, 4, sentinel_seed(r.me, 180));
  auto error_class = [](int rc) {
    int cls = MPI_SUCCESS;
    PMPI_Error_class(rc, &cls);
    return cls;
  };
  // The library alone, host buffers.
  MPI_Request sq;
  PMPI_Isend(src.host(), 6, vec, r.right, 1, comm, &sq);
  const int ref_rc = PMPI_Recv(dst.host(), 4, vec, r.left, 1, comm, MPI_STATUS_IGNORE);
  PMPI_Wait(&sq, MPI_STATUS_IGNORE);
  ASSERT_EQ(error_class(ref_rc), MPI_ERR_TRUNCATE);
  // Veneer, device buffers: blocking, then nonblocking.
  ASSERT_EQ(MPI_Isend(src.dev(), 6, vec, r.right, 2, comm, &sq), MPI_SUCCESS);
  MPI_Status st;
  EXPECT_EQ(error_class(MPI_Recv(dst.dev(), 4, vec, r.left, 2, comm, &st)), MPI_ERR_TRUNCATE);
  MPI_Wait(&sq, MPI_STATUS_IGNORE);
  MPI_Request q;
  PMPI_Isend(src.host(), 6, vec, r.right, 3, comm, &sq);
  PMPI_Irecv(dst.host(), 4, vec, r.left, 3, comm, &q);
  const int ref_wait_rc = PMPI_Wait(&q, &st);
  PMPI_Wait(&sq, MPI_STATUS_IGNORE);
  ASSERT_EQ(MPI_Isend(src.dev(), 6, vec, r.right, 4, comm, &sq), MPI_SUCCESS);
  ASSERT_EQ(MPI_Irecv(dst.dev(), 4, vec, r.left, 4, comm, &q), MPI_SUCCESS);
  EXPECT_EQ(error_class(MPI_Wait(&q, &st)), error_class(ref_wait_rc));
  MPI_Wait(&sq, MPI_STATUS_IGNORE);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Type_free(&vec);
  MPI_Comm_free(&comm);
}

// Device traffic from two threads at once (MPI_THREAD_MULTIPLE): Veneer's
// packer cache, pools and the emulator's per-thread streams are shared.
TEST_F(Device, ConcurrentThreads) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the library gave no MPI_THREAD_MULTIPLE";
  Ring r;
  constexpr int kThreads = 2, kRounds = 8;
  std::vector<MPI_Comm> comms(kThreads);
  for (MPI_Comm& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<int> bad(kThreads, 0);
  auto work = [&](int t) {
    TypeSet set;  // each thread makes and frees its own types
    for (int round = 0; round < kRounds; ++round) {
      const TestType& tt = set.types[static_cast<size_t>((round + t) % static_cast<int>(set.types.size()))];
      const int salt = 200 + 10 * t + round;
      Typed src(tt.type, tt.count, data_seed(r.me, salt));
      Typed dst(tt.type, tt.count, sentinel_seed(r.me, salt));
      Typed from_left(tt.type, tt.count, data_seed(r.left, salt));
      const std::vector<char> want =
          library_unpacked(dst.image(), tt.type, tt.count, library_pack(from_left.host(), tt.count, tt.type));
      MPI_Request q[2];
      MPI_Irecv(dst.dev(), tt.count, tt.type, r.left, round, comms[static_cast<size_t>(t)], &q[0]);
      MPI_Isend(src.dev(), tt.count, tt.type, r.right, round, comms[static_cast<size_t>(t)], &q[1]);
      MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
      if (dst.download() != want) ++bad[static_cast<size_t>(t)];
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
  for (MPI_Comm& c : comms) MPI_Comm_free(&c);
}

// MPI lets a type be freed while an operation that uses it is pending; the
// handle may then be reused by a new type before the receive completes.
TEST_F(Device, TypeFreedWhileDeviceReceivePending) {
  Ring r;
  MPI_Datatype t;
  MPI_Type_vector(40, 3, 5, MPI_INT, &t);
  MPI_Type_commit(&t);
  Typed dst(t, 3, sentinel_seed(r.me, 210));
  Typed src(t, 3, data_seed(r.me, 210));
  Typed from_left(t, 3, data_seed(r.left, 210));
  const std::vector<char> want = library_unpacked(dst.image(), t, 3, library_pack(from_left.host(), 3, t));
  MPI_Request q[2];
  ASSERT_EQ(MPI_Irecv(dst.dev(), 3, t, r.left, 15, MPI_COMM_WORLD, &q[0]), MPI_SUCCESS);
  MPI_Type_free(&t);
  // Another layout, likely under the same handle, used meanwhile.
  MPI_Datatype other;
  MPI_Type_vector(7, 1, 2, MPI_DOUBLE, &other);
  MPI_Type_commit(&other);
  Typed osrc(other, 2, data_seed(r.me, 211));
  std::vector<char> packed(static_cast<size_t>(2 * type_size(other)));
  int pos = 0;
  ASSERT_EQ(MPI_Pack(osrc.dev(), 2, other, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(same_bytes(packed, library_pack(osrc.host(), 2, other)));
  // The send's type: a new one with the first one's layout.
  MPI_Datatype t2;
  MPI_Type_vector(40, 3, 5, MPI_INT, &t2);
  MPI_Type_commit(&t2);
  ASSERT_EQ(MPI_Isend(src.dev(), 3, t2, r.right, 15, MPI_COMM_WORLD, &q[1]), MPI_SUCCESS);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  EXPECT_TRUE(same_bytes(dst.download(), want));
  MPI_Type_free(&t2);
  MPI_Type_free(&other);
}

}  // namespace
}  // namespace veneer::test
