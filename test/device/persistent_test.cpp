// SPDX-License-Identifier: BSD-3-Clause
// MPI tests of persistent sends and receives on device buffers (MPI_Send_init,
// Ssend_init, Bsend_init, Rsend_init, Recv_init, MPI_Start, MPI_Startall,
// MPI_Request_free) on the device emulator (test/device/emulator.h), whose
// device memory the host cannot touch: a device buffer handed to a library
// that is not CUDA-aware faults. The reference is the library's own pack and
// unpack of host copies of the same buffers, compared byte for byte over each
// receive buffer's whole footprint (gaps included). CMake runs it as
// device_mpi_test is run: automatic, staged, CUDA-aware and refused layouts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/device_runtime.h"
#include "kernels/device_transfer.h"
#include "test/device/emulator.h"

namespace {

using veneer::test::EmulatedRuntime;

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == value;
}

EmulatedRuntime& emu() {
  // Never destroyed: MPI_Finalize hands Veneer's pooled buffers back to it.
  static EmulatedRuntime* e = [] {
    veneer::test::EmulatorOptions o;
    o.host_accessible = env_is("VENEER_CUDA_AWARE", "1");  // a CUDA-aware library may read device memory
    o.refuse_layouts = env_is("VENEER_TEST_EMULATOR_REFUSE", "1");
    auto* r = new EmulatedRuntime(o);
    veneer::kernels::install_device_runtime(r);
    return r;
  }();
  return *e;
}
[[maybe_unused]] const bool g_installed = (emu(), true);

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::vector<char> pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& c : v) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return v;
}

testing::AssertionResult same_bytes(const std::vector<char>& got, const std::vector<char>& want) {
  if (got.size() != want.size()) return testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  const auto d = std::mismatch(got.begin(), got.end(), want.begin());
  if (d.first != got.end()) return testing::AssertionFailure() << "first difference at byte " << d.first - got.begin();
  return testing::AssertionSuccess();
}

// The bytes `count` instances of `type` touch relative to the buffer pointer.
struct Footprint {
  int64_t lo = 0, span = 0;
};
Footprint footprint(MPI_Datatype type, int count) {
  MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &tlb, &textent);
  const int64_t reach = int64_t{count - 1} * extent;
  return {tlb + std::min<int64_t>(0, reach), std::max<int64_t>(textent + std::abs(reach), 1)};
}

// `count` instances of `type` on the device (or the host) with a host image of their bytes.
class Typed {
 public:
  Typed(MPI_Datatype type, int count, uint32_t seed, bool on_device)
      : fp_(footprint(type, count)), image_(pattern(static_cast<size_t>(fp_.span), seed)), on_device_(on_device) {
    if (on_device_) {
      dev_ = static_cast<char*>(emu().device_alloc(image_.size()));
      emu().upload(dev_, image_.data(), image_.size());
    } else {
      host_ = image_;
    }
  }
  ~Typed() {
    if (dev_) emu().device_free(dev_);
  }
  Typed(const Typed&) = delete;
  Typed& operator=(const Typed&) = delete;
  // The pointer MPI calls get.
  void* buf() { return (on_device_ ? dev_ : host_.data()) - fp_.lo; }
  void* image_ptr() { return image_.data() - fp_.lo; }
  const std::vector<char>& image() const { return image_; }
  // New contents, on the device (or host) and in the image.
  void refill(uint32_t seed) {
    image_ = pattern(image_.size(), seed);
    if (on_device_) emu().upload(dev_, image_.data(), image_.size());
    else host_ = image_;
  }
  std::vector<char> contents() const {
    if (!on_device_) return host_;
    std::vector<char> out(image_.size());
    emu().download(out.data(), dev_, out.size());
    return out;
  }

 private:
  Footprint fp_;
  std::vector<char> image_;
  bool on_device_;
  char* dev_ = nullptr;
  std::vector<char> host_;
};

// What receiving `from`'s bytes into `into` must leave: the library's pack and unpack on host copies.
std::vector<char> expected(Typed& from, Typed& into, MPI_Datatype type, int count) {
  int size = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<char> packed(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(from.image_ptr(), count, type, packed.data(), size, &pos, MPI_COMM_WORLD);
  std::vector<char> want = into.image();
  const Footprint fp = footprint(type, count);
  int at = 0;
  PMPI_Unpack(packed.data(), pos, &at, want.data() - fp.lo, count, type, MPI_COMM_WORLD);
  return want;
}

struct TestType {
  std::string name;
  MPI_Datatype type;
  int count;
};

// A vector, an indexed type, a struct with gaps (resized), a subarray, a
// negative stride, and a contiguous type (a CUDA-aware library's own business).
class TypeSet {
 public:
  TypeSet() {
    MPI_Datatype t;
    MPI_Type_vector(16, 2, 5, MPI_DOUBLE, &t);
    add("vector", t, 5);
    const int blocks[] = {3, 1, 4, 1, 5}, displs[] = {0, 4, 7, 13, 20};
    MPI_Type_indexed(5, blocks, displs, MPI_INT, &t);
    add("indexed", t, 9);
    MPI_Datatype st;
    const int sblocks[] = {1, 1, 3};
    const MPI_Aint sdispls[] = {0, 8, 16};
    const MPI_Datatype stypes[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Type_create_struct(3, sblocks, sdispls, stypes, &st);
    MPI_Type_create_resized(st, 0, 40, &t);
    MPI_Type_free(&st);
    add("resized_struct", t, 12);
    const int sizes[] = {6, 5, 4}, sub[] = {4, 3, 2}, starts[] = {1, 1, 1};
    MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &t);
    add("subarray", t, 2);
    MPI_Type_vector(6, 1, -3, MPI_DOUBLE, &t);
    add("negative_stride", t, 4);
    MPI_Type_contiguous(7, MPI_INT, &t);
    add("int_x7", t, 40);
  }
  ~TypeSet() {
    for (TestType& t : types) MPI_Type_free(&t.type);
  }
  TypeSet(const TypeSet&) = delete;
  TypeSet& operator=(const TypeSet&) = delete;
  std::vector<TestType> types;

 private:
  void add(const char* name, MPI_Datatype t, int count) {
    MPI_Type_commit(&t);
    types.push_back({name, t, count});
  }
};

struct Ring {
  int me = rank_of(), p = size_of(), right = (me + 1) % p, left = (me + p - 1) % p;
};

uint32_t seed_of(int rank, int round) { return static_cast<uint32_t>(rank * 1000 + round + 1); }

enum class Completion { wait, waitall, testall_loop, waitany, test_loop, waitsome, testany_loop };
const Completion kCompletions[] = {Completion::wait,        Completion::waitall,   Completion::testall_loop,
                                   Completion::waitany,     Completion::test_loop, Completion::waitsome,
                                   Completion::testany_loop};

// Completes reqs[0] (the receive) and reqs[1] (the send); the receive's status in *st.
void complete(Completion how, MPI_Request reqs[2], MPI_Status* st) {
  MPI_Status sts[2];
  switch (how) {
    case Completion::wait:
      ASSERT_EQ(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&reqs[0], st), MPI_SUCCESS);
      break;
    case Completion::waitall:
      ASSERT_EQ(MPI_Waitall(2, reqs, sts), MPI_SUCCESS);
      *st = sts[0];
      break;
    case Completion::testall_loop:
      for (int flag = 0; !flag;) ASSERT_EQ(MPI_Testall(2, reqs, &flag, sts), MPI_SUCCESS);
      *st = sts[0];
      break;
    case Completion::waitany:
      for (int done = 0; done < 2; ++done) {
        int idx = MPI_UNDEFINED;
        MPI_Status s;
        ASSERT_EQ(MPI_Waitany(2, reqs, &idx, &s), MPI_SUCCESS);
        ASSERT_NE(idx, MPI_UNDEFINED);
        if (idx == 0) *st = s;
      }
      break;
    case Completion::test_loop:
      // Each request is tested until its flag is set, and not again: a
      // completed persistent request is inactive, and a second test of it
      // would report an empty status.
      for (int rflag = 0, sflag = 0; !rflag || !sflag;) {
        if (!rflag) ASSERT_EQ(MPI_Test(&reqs[0], &rflag, st), MPI_SUCCESS);
        if (!sflag) ASSERT_EQ(MPI_Test(&reqs[1], &sflag, MPI_STATUS_IGNORE), MPI_SUCCESS);
      }
      break;
    case Completion::testany_loop:
      for (int done = 0; done < 2;) {
        int idx = MPI_UNDEFINED, flag = 0;
        MPI_Status s;
        ASSERT_EQ(MPI_Testany(2, reqs, &idx, &flag, &s), MPI_SUCCESS);
        if (flag && idx != MPI_UNDEFINED) {
          if (idx == 0) *st = s;
          ++done;
        }
      }
      break;
    case Completion::waitsome:
      for (int left = 2; left > 0;) {
        int out = 0, idx[2];
        ASSERT_EQ(MPI_Waitsome(2, reqs, &out, idx, sts), MPI_SUCCESS);
        ASSERT_NE(out, MPI_UNDEFINED);
        for (int k = 0; k < out; ++k)
          if (idx[k] == 0) *st = sts[k];
        left -= out;
      }
      break;
  }
}

class Persistent : public testing::Test {
 protected:
  void SetUp() override { failed_before_ = emu().counters().failed_steps; }
  void TearDown() override { EXPECT_EQ(emu().counters().failed_steps, failed_before_); }
  int64_t failed_before_ = 0;
};

enum class SendKind { standard, synchronous, buffered, ready };

int send_init(SendKind kind, void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Request* req) {
  switch (kind) {
    case SendKind::standard: return MPI_Send_init(buf, count, type, dest, tag, MPI_COMM_WORLD, req);
    case SendKind::synchronous: return MPI_Ssend_init(buf, count, type, dest, tag, MPI_COMM_WORLD, req);
    case SendKind::buffered: return MPI_Bsend_init(buf, count, type, dest, tag, MPI_COMM_WORLD, req);
    case SendKind::ready: return MPI_Rsend_init(buf, count, type, dest, tag, MPI_COMM_WORLD, req);
  }
  return MPI_ERR_ARG;
}

// One request pair per type and send kind, started for several rounds (the
// device send buffer refilled before each, so every MPI_Start must pack it
// again), completed by a different completion call each round; the requests
// stay (inactive) after completing and are freed at the end.
TEST_F(Persistent, DeviceRingEverySendKindSeveralRoundsEveryCompletionCall) {
  Ring r;
  TypeSet set;
  std::vector<char> bsend_buffer(1 << 20);
  MPI_Buffer_attach(bsend_buffer.data(), static_cast<int>(bsend_buffer.size()));
  int tag = 0;
  for (SendKind kind : {SendKind::standard, SendKind::synchronous, SendKind::buffered, SendKind::ready}) {
    // Open MPI 4.1's own persistent buffered send to the sending rank itself
    // delivers the first round's bytes again in later rounds once a message
    // passes about 1 KiB (seen with host buffers and no Veneer): not on 1 rank.
    if (kind == SendKind::buffered && r.p == 1) continue;
    for (TestType& tt : set.types) {
      SCOPED_TRACE(tt.name + " send kind " + std::to_string(static_cast<int>(kind)));
      ++tag;
      Typed src(tt.type, tt.count, seed_of(r.me, 0), true);
      Typed dst(tt.type, tt.count, 0x5e000 + r.me, true);
      MPI_Request reqs[2];
      ASSERT_EQ(MPI_Recv_init(dst.buf(), tt.count, tt.type, r.left, tag, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
      ASSERT_EQ(send_init(kind, src.buf(), tt.count, tt.type, r.right, tag, &reqs[1]), MPI_SUCCESS);
      int round = 0;
      for (Completion how : kCompletions) {
        SCOPED_TRACE(round);
        src.refill(seed_of(r.me, round));
        Typed from_left(tt.type, tt.count, seed_of(r.left, round), false);
        const std::vector<char> want = expected(from_left, dst, tt.type, tt.count);
        if (kind == SendKind::ready) {
          // A ready send needs its receive posted: every receive starts before any send.
          ASSERT_EQ(MPI_Start(&reqs[0]), MPI_SUCCESS);
          MPI_Barrier(MPI_COMM_WORLD);
          ASSERT_EQ(MPI_Start(&reqs[1]), MPI_SUCCESS);
        } else if (round % 2 == 0) {
          ASSERT_EQ(MPI_Startall(2, reqs), MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Start(&reqs[1]), MPI_SUCCESS);
          ASSERT_EQ(MPI_Start(&reqs[0]), MPI_SUCCESS);
        }
        MPI_Status st;
        complete(how, reqs, &st);
        ASSERT_NE(reqs[0], MPI_REQUEST_NULL) << "a completed persistent request stays";
        ASSERT_NE(reqs[1], MPI_REQUEST_NULL);
        EXPECT_EQ(st.MPI_SOURCE, r.left);
        EXPECT_EQ(st.MPI_TAG, tag);
        int n = -1;
        MPI_Get_count(&st, tt.type, &n);
        EXPECT_EQ(n, tt.count);
        const std::vector<char> got = dst.contents();
        EXPECT_TRUE(same_bytes(got, want));
        EXPECT_TRUE(same_bytes(src.contents(), src.image())) << "the send buffer is the sender's";
        // Waiting on an inactive request returns at once and unpacks nothing again.
        MPI_Status empty;
        ASSERT_EQ(MPI_Wait(&reqs[0], &empty), MPI_SUCCESS);
        EXPECT_NE(reqs[0], MPI_REQUEST_NULL);
        EXPECT_TRUE(same_bytes(dst.contents(), got));
        MPI_Barrier(MPI_COMM_WORLD);
        ++round;
      }
      ASSERT_EQ(MPI_Request_free(&reqs[0]), MPI_SUCCESS);
      ASSERT_EQ(MPI_Request_free(&reqs[1]), MPI_SUCCESS);
      EXPECT_EQ(reqs[0], MPI_REQUEST_NULL);
      EXPECT_EQ(reqs[1], MPI_REQUEST_NULL);
    }
  }
  void* detached = nullptr;
  int detached_size = 0;
  MPI_Buffer_detach(&detached, &detached_size);
}

// MPI_Startall over device and host requests together: a device and a host
// receive, a device and a host send, each of a derived type.
TEST_F(Persistent, StartallMixesHostAndDeviceRequests) {
  Ring r;
  TypeSet set;
  for (TestType& tt : set.types) {
    SCOPED_TRACE(tt.name);
    Typed src_dev(tt.type, tt.count, seed_of(r.me, 50), true), src_host(tt.type, tt.count, seed_of(r.me, 60), false);
    Typed dst_dev(tt.type, tt.count, 0x5e100 + r.me, true), dst_host(tt.type, tt.count, 0x5e200 + r.me, false);
    MPI_Request reqs[4];
    // The device buffer receives what the left neighbour's host buffer sends, and the other way round.
    ASSERT_EQ(MPI_Recv_init(dst_dev.buf(), tt.count, tt.type, r.left, 1, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv_init(dst_host.buf(), tt.count, tt.type, r.left, 2, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send_init(src_host.buf(), tt.count, tt.type, r.right, 1, MPI_COMM_WORLD, &reqs[2]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send_init(src_dev.buf(), tt.count, tt.type, r.right, 2, MPI_COMM_WORLD, &reqs[3]), MPI_SUCCESS);
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE(round);
      src_dev.refill(seed_of(r.me, 50 + round));
      src_host.refill(seed_of(r.me, 60 + round));
      Typed left_host(tt.type, tt.count, seed_of(r.left, 60 + round), false);
      Typed left_dev(tt.type, tt.count, seed_of(r.left, 50 + round), false);
      const std::vector<char> want_dev = expected(left_host, dst_dev, tt.type, tt.count);
      const std::vector<char> want_host = expected(left_dev, dst_host, tt.type, tt.count);
      ASSERT_EQ(MPI_Startall(4, reqs), MPI_SUCCESS);
      MPI_Status sts[4];
      ASSERT_EQ(MPI_Waitall(4, reqs, sts), MPI_SUCCESS);
      for (MPI_Request q : reqs) EXPECT_NE(q, MPI_REQUEST_NULL);
      EXPECT_TRUE(same_bytes(dst_dev.contents(), want_dev)) << "device receive";
      EXPECT_TRUE(same_bytes(dst_host.contents(), want_host)) << "host receive";
      int n = -1;
      MPI_Get_count(&sts[0], tt.type, &n);
      EXPECT_EQ(n, tt.count);
      MPI_Barrier(MPI_COMM_WORLD);
    }
    for (MPI_Request& q : reqs) ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
  }
}

// MPI_Test sets the flag and leaves the request usable: started again, it
// carries the next round; MPI_Request_get_status before the wait unpacks too.
TEST_F(Persistent, TestFlagLeavesTheRequestUsable) {
  Ring r;
  TypeSet set;
  const TestType& tt = set.types.front();
  Typed src(tt.type, tt.count, seed_of(r.me, 70), true);
  Typed dst(tt.type, tt.count, 0x5e300 + r.me, true);
  MPI_Request reqs[2];
  ASSERT_EQ(MPI_Recv_init(dst.buf(), tt.count, tt.type, r.left, 7, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Send_init(src.buf(), tt.count, tt.type, r.right, 7, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    src.refill(seed_of(r.me, 70 + round));
    Typed from_left(tt.type, tt.count, seed_of(r.left, 70 + round), false);
    const std::vector<char> want = expected(from_left, dst, tt.type, tt.count);
    ASSERT_EQ(MPI_Startall(2, reqs), MPI_SUCCESS);
    int flag = 0;
    MPI_Status st;
    if (round % 2 == 0) {
      while (!flag) ASSERT_EQ(MPI_Test(&reqs[0], &flag, &st), MPI_SUCCESS);
    } else {
      while (!flag) ASSERT_EQ(MPI_Request_get_status(reqs[0], &flag, &st), MPI_SUCCESS);
      EXPECT_TRUE(same_bytes(dst.contents(), want)) << "readable once MPI_Request_get_status says complete";
      ASSERT_EQ(MPI_Wait(&reqs[0], &st), MPI_SUCCESS);
    }
    EXPECT_NE(reqs[0], MPI_REQUEST_NULL);
    EXPECT_EQ(st.MPI_SOURCE, r.left);
    EXPECT_TRUE(same_bytes(dst.contents(), want));
    ASSERT_EQ(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE), MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  for (MPI_Request& q : reqs) ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
}

// Requests freed without ever being started, and a receive cancelled after
// its start, leave nothing behind.
TEST_F(Persistent, FreedBeforeAnyStartAndCancelled) {
  TypeSet set;
  for (TestType& tt : set.types) {
    Typed buf(tt.type, tt.count, 0x5e400, true);
    MPI_Request s, q;
    ASSERT_EQ(MPI_Send_init(buf.buf(), tt.count, tt.type, rank_of(), 9, MPI_COMM_WORLD, &s), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv_init(buf.buf(), tt.count, tt.type, rank_of(), 9, MPI_COMM_WORLD, &q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Request_free(&s), MPI_SUCCESS);
    EXPECT_EQ(s, MPI_REQUEST_NULL);
    ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS);
    ASSERT_EQ(MPI_Cancel(&q), MPI_SUCCESS);
    MPI_Status st;
    ASSERT_EQ(MPI_Wait(&q, &st), MPI_SUCCESS);
    int cancelled = 0;
    MPI_Test_cancelled(&st, &cancelled);
    EXPECT_TRUE(cancelled);
    EXPECT_TRUE(same_bytes(buf.contents(), buf.image())) << "a cancelled receive writes nothing";
    ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
  }
}

// Buffered (MPI_Bsend, MPI_Ibsend) and ready (MPI_Irsend) sends of device
// and host buffers: the same one path as every other send.
TEST_F(Persistent, BufferedAndReadySendsHostAndDevice) {
  Ring r;
  TypeSet set;
  std::vector<char> bsend_buffer(1 << 20);
  MPI_Buffer_attach(bsend_buffer.data(), static_cast<int>(bsend_buffer.size()));
  int round = 0;
  for (TestType& tt : set.types) {
    for (int how = 0; how < 3; ++how) {  // Bsend, Ibsend, Irsend
      for (bool on_device : {true, false}) {
        SCOPED_TRACE(tt.name + " send " + std::to_string(how) + (on_device ? " device" : " host"));
        ++round;
        Typed src(tt.type, tt.count, seed_of(r.me, 100 + round), on_device);
        Typed dst(tt.type, tt.count, 0x5e500 + r.me, on_device);
        Typed from_left(tt.type, tt.count, seed_of(r.left, 100 + round), false);
        const std::vector<char> want = expected(from_left, dst, tt.type, tt.count);
        MPI_Request reqs[2];
        ASSERT_EQ(MPI_Irecv(dst.buf(), tt.count, tt.type, r.left, round, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);  // every receive is posted: a ready send may start
        if (how == 0) {
          ASSERT_EQ(MPI_Bsend(src.buf(), tt.count, tt.type, r.right, round, MPI_COMM_WORLD), MPI_SUCCESS);
          reqs[1] = MPI_REQUEST_NULL;
        } else if (how == 1) {
          ASSERT_EQ(MPI_Ibsend(src.buf(), tt.count, tt.type, r.right, round, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Irsend(src.buf(), tt.count, tt.type, r.right, round, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
        }
        MPI_Status sts[2];
        ASSERT_EQ(MPI_Waitall(2, reqs, sts), MPI_SUCCESS);
        int n = -1;
        MPI_Get_count(&sts[0], tt.type, &n);
        EXPECT_EQ(n, tt.count);
        EXPECT_TRUE(same_bytes(dst.contents(), want));
        EXPECT_TRUE(same_bytes(src.contents(), src.image()));
      }
    }
  }
  void* detached = nullptr;
  int detached_size = 0;
  MPI_Buffer_detach(&detached, &detached_size);
}

// The MPI-4 _c forms of the sends and receives Veneer carries (where mpi.h
// has them: MPICH 4.0, not Open MPI 4.1): each on device buffers, checked
// against the library on host copies.
TEST_F(Persistent, LargeCountFormsOnDeviceBuffers) {
#ifndef VENEER_HAVE_LARGE_COUNT
  GTEST_SKIP() << "this MPI has no MPI-4 large-count (_c) functions";
#else
  Ring r;
  TypeSet set;
  std::vector<char> bsend_buffer(1 << 20);
  MPI_Buffer_attach(bsend_buffer.data(), static_cast<int>(bsend_buffer.size()));
  for (TestType& tt : set.types) {
    for (int how = 0; how < 9; ++how) {
      SCOPED_TRACE(tt.name + " form " + std::to_string(how));
      const int tag = 200 + how;
      Typed src(tt.type, tt.count, seed_of(r.me, tag), true);
      Typed dst(tt.type, tt.count, 0x5e600 + r.me, true);
      Typed from_left(tt.type, tt.count, seed_of(r.left, tag), false);
      const std::vector<char> want = expected(from_left, dst, tt.type, tt.count);
      const MPI_Count n = tt.count;
      MPI_Status st;
      if (how == 8) {
        // Sendrecv_replace_c: the sent buffer receives the left neighbour's bytes.
        Typed both(tt.type, tt.count, seed_of(r.me, tag), true);
        ASSERT_EQ(MPI_Sendrecv_replace_c(both.buf(), n, tt.type, r.right, tag, r.left, tag, MPI_COMM_WORLD, &st),
                  MPI_SUCCESS);
        EXPECT_TRUE(same_bytes(both.contents(), expected(from_left, both, tt.type, tt.count)));
        continue;
      }
      MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      if (how == 5) {
        ASSERT_EQ(MPI_Recv_init_c(dst.buf(), n, tt.type, r.left, tag, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
        ASSERT_EQ(MPI_Start(&reqs[0]), MPI_SUCCESS);
      } else if (how != 6 && how != 7) {
        ASSERT_EQ(MPI_Irecv(dst.buf(), tt.count, tt.type, r.left, tag, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
      }
      MPI_Barrier(MPI_COMM_WORLD);  // receives posted: ready sends may start
      switch (how) {
        case 0:
          ASSERT_EQ(MPI_Issend_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
          break;
        case 1:
          ASSERT_EQ(MPI_Ibsend_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
          break;
        case 2:
          ASSERT_EQ(MPI_Irsend_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
          break;
        case 3: ASSERT_EQ(MPI_Bsend_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD), MPI_SUCCESS); break;
        case 4: ASSERT_EQ(MPI_Rsend_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD), MPI_SUCCESS); break;
        default:
          ASSERT_EQ(MPI_Send_init_c(src.buf(), n, tt.type, r.right, tag, MPI_COMM_WORLD, &reqs[1]), MPI_SUCCESS);
          ASSERT_EQ(MPI_Start(&reqs[1]), MPI_SUCCESS);
      }
      if (how == 6 || how == 7) {
        // Matched receives: probe, then receive the matched message into device memory.
        MPI_Message msg;
        ASSERT_EQ(MPI_Mprobe(r.left, tag, MPI_COMM_WORLD, &msg, &st), MPI_SUCCESS);
        if (how == 6) {
          ASSERT_EQ(MPI_Mrecv_c(dst.buf(), n, tt.type, &msg, &st), MPI_SUCCESS);
        } else {
          ASSERT_EQ(MPI_Imrecv_c(dst.buf(), n, tt.type, &msg, &reqs[0]), MPI_SUCCESS);
        }
      }
      MPI_Status sts[2];
      ASSERT_EQ(MPI_Waitall(2, reqs, sts), MPI_SUCCESS);
      EXPECT_TRUE(same_bytes(dst.contents(), want));
      for (MPI_Request& q : reqs)
        if (q != MPI_REQUEST_NULL) ASSERT_EQ(MPI_Request_free(&q), MPI_SUCCESS);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  void* detached = nullptr;
  int detached_size = 0;
  MPI_Buffer_detach(&detached, &detached_size);
#endif
}

// Last: every staging buffer went back with its request.
TEST(PersistentZ, NothingOutstandingOncePoolsAreReleased) {
  MPI_Barrier(MPI_COMM_WORLD);
  veneer::kernels::release_pools();
  const auto c = emu().counters();
  EXPECT_EQ(c.device_allocations, 0);
  EXPECT_EQ(c.pinned_allocations, 0);
  EXPECT_EQ(c.failed_steps, 0);
}

}  // namespace
