// SPDX-License-Identifier: BSD-3-Clause
// The long run: many mixed MPI calls through Veneer, every result checked
// against the library, and Veneer's own memory flat once the working set is
// warm (the bounded-memory rule of ARCHITECTURE.md).
//
// Each round creates derived types (a different constructor each round),
// uses them for MPI_Pack/Unpack, sends and receives completed through every
// completion call (some requests freed, some receives that never match
// cancelled), persistent requests, Sendrecv(_replace), Alltoallv; duplicates
// or splits MPI_COMM_WORLD and runs every collective on the new communicator
// (CMake forces Veneer's algorithms by message size); moves typed data
// between buffers on the emulated GPU (test/device/emulator.h) every few
// rounds; and frees everything it made. Results are compared with what the
// library (PMPI_*) gives for the same arguments.
//
// After a warm-up (a tenth of the run) and at ten checkpoints after it, the
// test reads Veneer's footprint (interposer/footprint.h: type cache, staging
// and pinned pools, device packers, request table, communicator hierarchies),
// the open file descriptors and the heap in use, and requires that none of
// them grew with the number of calls.
//
// VENEER_LONGRUN_CALLS: MPI calls to make (default 100000, about what CI
// runs in seconds); VENEER_LONGRUN_CALLS=1000000 runs the full million.
#include <dirent.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "interposer/footprint.h"
#include "kernels/device_runtime.h"
#include "test/device/emulator.h"

namespace {

using veneer::Footprint;

veneer::test::EmulatedRuntime& emu() {
  // Never destroyed: MPI_Finalize hands Veneer's pooled buffers back to it.
  static veneer::test::EmulatedRuntime* e = [] {
    auto* r = new veneer::test::EmulatedRuntime(veneer::test::EmulatorOptions{});
    veneer::kernels::install_device_runtime(r);
    return r;
  }();
  return *e;
}
// Installed during static initialisation, before MPI_Init.
[[maybe_unused]] const bool g_installed = (emu(), true);

int64_t target_calls() {
  const char* v = std::getenv("VENEER_LONGRUN_CALLS");
  const long long n = v ? std::atoll(v) : 0;
  return n > 0 ? n : 100000;
}

int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n - 1;  // the directory stream's own descriptor
}

// Heap bytes in use (malloc'd, including mmapped chunks), less the staging
// buffers Veneer keeps in its pool (bounded apart).
int64_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd) - veneer::footprint().staging_bytes;
}

std::vector<char> pattern(size_t n, uint32_t seed) {
  std::vector<char> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<char>(x >> 24);
  }
  return v;
}

// The bytes `count` instances of `type` may touch, relative to the buffer pointer.
struct Span {
  int64_t lo = 0, bytes = 0;
};
Span span_of(MPI_Datatype type, int count) {
  MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &tlb, &textent);
  const int64_t reach = int64_t{count - 1} * extent;
  const int64_t lo = tlb + std::min<int64_t>(0, reach);
  const int64_t hi = tlb + textent + std::max<int64_t>(0, reach);
  return {lo, std::max<int64_t>(hi - lo, 1)};
}

// `count` instances of `type` over a host image whose first byte is the lower bound.
struct Typed {
  MPI_Datatype type;
  int count;
  Span span;
  std::vector<char> image;
  Typed(MPI_Datatype t, int n, uint32_t seed) : type(t), count(n), span(span_of(t, n)) {
    image = pattern(static_cast<size_t>(span.bytes), seed);
  }
  void* buf() { return image.data() - span.lo; }
};

std::vector<char> library_pack(const void* buf, int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<char> out(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(buf, count, type, out.data(), size, &pos, MPI_COMM_WORLD);
  out.resize(static_cast<size_t>(pos));
  return out;
}

// What a receive of the sender's image into `into` must leave: the library's unpack of its packed bytes.
std::vector<char> expected_receive(Typed& sender, const Typed& into) {
  const std::vector<char> packed = library_pack(sender.buf(), sender.count, sender.type);
  std::vector<char> want = into.image;
  int pos = 0;
  PMPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, want.data() - into.span.lo, into.count, into.type,
              MPI_COMM_WORLD);
  return want;
}

// Equal contents, or where they first differ (not the whole buffers).
template <class T>
testing::AssertionResult same_bytes(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  const auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  if (diff.first == got.end()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "first difference at element " << (diff.first - got.begin()) << " of "
                                     << got.size();
}

// Heap bytes the library itself keeps for good per derived type committed
// and freed, measured without Veneer (PMPI_* only). MPICH 4.0 over UCX keeps
// 64 bytes per type on some ranks (a UCX datatype never destroyed), with or
// without Veneer; the heap check allows for it.
int64_t library_bytes_per_type() {
  constexpr int kTypes = 4000;
  const int64_t before = heap_in_use();
  for (int i = 0; i < kTypes; ++i) {
    MPI_Datatype t;
    PMPI_Type_vector(4 + i % 5, 1, 2, MPI_DOUBLE, &t);
    PMPI_Type_commit(&t);
    PMPI_Type_free(&t);
  }
  return std::max<int64_t>(0, (heap_in_use() - before + kTypes / 2) / kTypes);
}

// The long run's state: the call count and the ranks of the ring.
struct LongRun {
  int rank = 0, size = 1, left = 0, right = 0;
  int64_t calls = 0;            // MPI calls made through Veneer, but for polls that completed nothing
  int64_t polls = 0;            // those polls
  int64_t types_committed = 0;  // and duplicated
  int64_t round = 0;
  int64_t largest_message = 0;  // bytes of the largest typed message sent
  int64_t largest_device_message = 0;

  uint32_t seed(int who, int salt) const { return static_cast<uint32_t>(round * 7919 + who * 104729 + salt * 13 + 1); }
};

// A derived type of one of several constructors, chosen by the round; `scale` sets its size.
MPI_Datatype make_type(int64_t round, int scale, LongRun& run) {
  MPI_Datatype t = MPI_DATATYPE_NULL, inner = MPI_DATATYPE_NULL;
  const int n = 4 + scale;
  switch (round % 9) {
    case 0: MPI_Type_vector(n, 1, 2, MPI_DOUBLE, &t); break;
    case 1: MPI_Type_vector(n, 3, 5, MPI_BYTE, &t); break;
    case 2: {
      std::vector<int> lens(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        lens[static_cast<size_t>(i)] = 1 + i % 3;
        displs[static_cast<size_t>(i)] = 5 * i + (i % 2);
      }
      MPI_Type_indexed(n, lens.data(), displs.data(), MPI_INT, &t);
      break;
    }
    case 3: {
      const int lens[3] = {1, 2, 3};
      const MPI_Aint displs[3] = {0, 8, 32};
      const MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT};
      MPI_Type_create_struct(3, lens, displs, types, &inner);
      MPI_Type_create_resized(inner, 0, 48, &t);
      run.calls += 2;
      MPI_Type_free(&inner);
      break;
    }
    case 4: {
      const int sizes[2] = {n, n}, sub[2] = {n - 2, 1}, start[2] = {1, 2};
      MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, &t);
      break;
    }
    case 5:
      MPI_Type_vector(2, 1, 3, MPI_INT, &inner);
      MPI_Type_create_hvector(n, 1, 40, inner, &t);
      run.calls += 2;
      MPI_Type_free(&inner);
      break;
    case 6: {
      std::vector<int> displs(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) displs[static_cast<size_t>(i)] = 3 * (n - i);
      MPI_Type_create_indexed_block(n, 2, displs.data(), MPI_SHORT, &t);
      break;
    }
    case 7:
      MPI_Type_vector(n, 2, 6, MPI_FLOAT, &inner);
      MPI_Type_commit(&inner);
      MPI_Type_dup(inner, &t);
      run.calls += 3;
      run.types_committed += 2;
      MPI_Type_free(&inner);
      return t;  // a duplicate of a committed type is committed
    default: {
      MPI_Type_vector(n, 1, 4, MPI_LONG_LONG, &inner);
      MPI_Type_contiguous(2, inner, &t);
      run.calls += 2;
      MPI_Type_free(&inner);
      break;
    }
  }
  MPI_Type_commit(&t);
  run.calls += 2;
  ++run.types_committed;
  return t;
}

// How a pair of nonblocking requests (a receive at [0], a send at [1]) is completed.
enum class Completion {
  wait,
  test,
  waitall,
  testall,
  waitany,
  testany,
  waitsome,
  testsome,
  get_status,
  free_send,
  count_
};

// Completes reqs[0..n) with `how`. A poll that completes nothing is counted
// apart (how many there are depends on the library and the machine's load).
void complete(Completion how, MPI_Request* reqs, int n, LongRun& run) {
  auto pending = [&] {
    for (int i = 0; i < n; ++i)
      if (reqs[i] != MPI_REQUEST_NULL) return true;
    return false;
  };
  auto polled = [&](bool done) { ++(done ? run.calls : run.polls); };
  MPI_Status st;
  int flag = 0, index = 0, outcount = 0;
  std::array<int, 2> indices{};
  switch (how) {
    case Completion::wait:
      for (int i = 0; i < n; ++i, ++run.calls) MPI_Wait(&reqs[i], &st);
      break;
    case Completion::test:
      for (int i = 0; i < n; ++i) do {
          MPI_Test(&reqs[i], &flag, &st);
          polled(flag);
        } while (!flag);
      break;
    case Completion::waitall:
      MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
      ++run.calls;
      break;
    case Completion::testall:
      do {
        MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        polled(flag);
      } while (!flag);
      break;
    case Completion::waitany:
      while (pending()) {
        MPI_Waitany(n, reqs, &index, &st);
        ++run.calls;
      }
      break;
    case Completion::testany:
      while (pending()) {
        MPI_Testany(n, reqs, &index, &flag, &st);
        polled(flag && index != MPI_UNDEFINED);
      }
      break;
    case Completion::waitsome:
      while (pending()) {
        MPI_Waitsome(n, reqs, &outcount, indices.data(), MPI_STATUSES_IGNORE);
        ++run.calls;
      }
      break;
    case Completion::testsome:
      while (pending()) {
        MPI_Testsome(n, reqs, &outcount, indices.data(), MPI_STATUSES_IGNORE);
        polled(outcount > 0);
      }
      break;
    case Completion::get_status:
      for (int i = 0; i < n; ++i) {
        do {
          MPI_Request_get_status(reqs[i], &flag, &st);
          polled(flag);
        } while (!flag);
        MPI_Wait(&reqs[i], &st);
        ++run.calls;
      }
      break;
    case Completion::free_send:
      // The send is freed at once; the receive's completion says the message left.
      if (n > 1) {
        MPI_Request_free(&reqs[1]);
        ++run.calls;
      }
      MPI_Wait(&reqs[0], &st);
      ++run.calls;
      if (n > 1) EXPECT_EQ(reqs[1], MPI_REQUEST_NULL);
      break;
    case Completion::count_: break;
  }
}

// Typed point-to-point between ring neighbours with `type`, every way, checked
// against the library's unpack of the sender's bytes.
void exchange(MPI_Datatype type, int count, MPI_Comm comm, LongRun& run) {
  const int64_t salt_base = run.round % static_cast<int64_t>(Completion::count_);
  int bytes = 0;
  PMPI_Type_size(type, &bytes);
  run.largest_message = std::max<int64_t>(run.largest_message, int64_t{bytes} * count);

  // 1. Isend/Irecv, completed through one completion call (a different one each round).
  {
    Typed out(type, count, run.seed(run.rank, 1)), in(type, count, run.seed(run.rank, 2));
    Typed sender(type, count, run.seed(run.left, 1));
    const std::vector<char> want = expected_receive(sender, in);
    MPI_Request reqs[2];
    MPI_Irecv(in.buf(), count, type, run.left, 11, comm, &reqs[0]);
    MPI_Isend(out.buf(), count, type, run.right, 11, comm, &reqs[1]);
    run.calls += 2;
    complete(static_cast<Completion>(salt_base), reqs, 2, run);
    EXPECT_TRUE(same_bytes(in.image, want)) << "Isend/Irecv round " << run.round << " completion " << salt_base;
  }
  // 2. A receive that never matches, cancelled, completed through another completion call.
  {
    Typed in(type, count, run.seed(run.rank, 3));
    const std::vector<char> untouched = in.image;
    MPI_Request req;
    MPI_Irecv(in.buf(), count, type, run.round % 2 ? MPI_ANY_SOURCE : run.left, 999, comm, &req);
    MPI_Cancel(&req);
    run.calls += 2;
    auto how = static_cast<Completion>((salt_base + 3) % static_cast<int64_t>(Completion::count_));
    if (how == Completion::free_send) how = Completion::wait;
    MPI_Status st;
    if (how == Completion::wait) {
      MPI_Wait(&req, &st);
      ++run.calls;
      int cancelled = 0;
      MPI_Test_cancelled(&st, &cancelled);
      EXPECT_TRUE(cancelled);
    } else {
      complete(how, &req, 1, run);
    }
    EXPECT_EQ(req, MPI_REQUEST_NULL);
    EXPECT_TRUE(same_bytes(in.image, untouched)) << "a cancelled receive wrote into its buffer";
  }
  // 3. Blocking: Irecv + Send (Ssend every other round) + Wait; Sendrecv; Sendrecv_replace.
  {
    Typed out(type, count, run.seed(run.rank, 4)), in(type, count, run.seed(run.rank, 5));
    Typed sender(type, count, run.seed(run.left, 4));
    const std::vector<char> want = expected_receive(sender, in);
    MPI_Request req;
    MPI_Irecv(in.buf(), count, type, run.left, 12, comm, &req);
    if (run.round % 2) MPI_Ssend(out.buf(), count, type, run.right, 12, comm);
    else MPI_Send(out.buf(), count, type, run.right, 12, comm);
    MPI_Status st;
    MPI_Wait(&req, &st);
    run.calls += 3;
    EXPECT_TRUE(same_bytes(in.image, want)) << "Send/Irecv round " << run.round;
    int elements = 0;
    PMPI_Get_count(&st, type, &elements);
    EXPECT_EQ(elements, count);
  }
  {
    Typed out(type, count, run.seed(run.rank, 6)), in(type, count, run.seed(run.rank, 7));
    Typed sender(type, count, run.seed(run.left, 6));
    const std::vector<char> want = expected_receive(sender, in);
    MPI_Sendrecv(out.buf(), count, type, run.right, 13, in.buf(), count, type, run.left, 13, comm, MPI_STATUS_IGNORE);
    ++run.calls;
    EXPECT_TRUE(same_bytes(in.image, want)) << "Sendrecv round " << run.round;
  }
  {
    Typed both(type, count, run.seed(run.rank, 8));
    Typed sender(type, count, run.seed(run.left, 8));
    const std::vector<char> want = expected_receive(sender, both);
    MPI_Sendrecv_replace(both.buf(), count, type, run.right, 14, run.left, 14, comm, MPI_STATUS_IGNORE);
    ++run.calls;
    EXPECT_TRUE(same_bytes(both.image, want)) << "Sendrecv_replace round " << run.round;
  }
  // 4. Persistent requests, started three times with fresh data, then freed.
  {
    Typed out(type, count, 0), in(type, count, run.seed(run.rank, 9));
    MPI_Request reqs[2];
    MPI_Recv_init(in.buf(), count, type, run.left, 15, comm, &reqs[0]);
    MPI_Send_init(out.buf(), count, type, run.right, 15, comm, &reqs[1]);
    run.calls += 2;
    for (int start = 0; start < 3; ++start) {
      const std::vector<char> fresh = pattern(out.image.size(), run.seed(run.rank, 20 + start));
      std::copy(fresh.begin(), fresh.end(), out.image.begin());  // the same storage: the request holds its address
      Typed sender(type, count, run.seed(run.left, 20 + start));
      const std::vector<char> want = expected_receive(sender, in);
      if (start == 1) {
        MPI_Start(&reqs[0]);
        MPI_Start(&reqs[1]);
        run.calls += 2;
      } else {
        MPI_Startall(2, reqs);
        ++run.calls;
      }
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
      ++run.calls;
      EXPECT_TRUE(same_bytes(in.image, want)) << "persistent round " << run.round << " start " << start;
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);
    run.calls += 2;
  }
}

// MPI_Pack/Unpack (in two pieces) against the library's.
void pack_unpack(MPI_Datatype type, int count, LongRun& run) {
  Typed src(type, count, run.seed(run.rank, 30));
  const std::vector<char> want = library_pack(src.buf(), count, type);
  int size = 0;
  MPI_Pack_size(count, type, MPI_COMM_WORLD, &size);
  std::vector<char> packed(static_cast<size_t>(size) + 16, 0);
  int pos = 0;
  const int first = count / 2;
  MPI_Pack(src.buf(), first, type, packed.data(), size, &pos, MPI_COMM_WORLD);
  char* second = static_cast<char*>(src.buf()) + [&] {
    MPI_Aint lb = 0, extent = 0;
    PMPI_Type_get_extent(type, &lb, &extent);
    return extent * first;
  }();
  MPI_Pack(second, count - first, type, packed.data(), size, &pos, MPI_COMM_WORLD);
  run.calls += 3;
  ASSERT_EQ(pos, static_cast<int>(want.size()));
  packed.resize(static_cast<size_t>(pos));
  EXPECT_TRUE(same_bytes(packed, want)) << "MPI_Pack round " << run.round;

  Typed mine(type, count, run.seed(run.rank, 31));
  std::vector<char> lib_image = mine.image;
  int p = 0;
  PMPI_Unpack(want.data(), pos, &p, lib_image.data() - mine.span.lo, count, type, MPI_COMM_WORLD);
  p = 0;
  MPI_Unpack(want.data(), pos, &p, mine.buf(), count, type, MPI_COMM_WORLD);
  ++run.calls;
  EXPECT_EQ(p, pos);
  EXPECT_TRUE(same_bytes(mine.image, lib_image)) << "MPI_Unpack round " << run.round;
}

// Every collective on `comm`, and Alltoallv with derived types, against the library.
void collectives(MPI_Comm comm, MPI_Datatype type, LongRun& run) {
  int n = 0, me = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  run.calls += 2;
  // Sizes that walk through the forced algorithms' ranges (see CMakeLists.txt).
  constexpr std::array<int, 6> counts{1, 24, 200, 1500, 6000, 20000};
  // (round / 3: the kind of communicator changes with round % 3, and every kind meets every size)
  const int count = counts[static_cast<size_t>(run.round / 3 % static_cast<int64_t>(counts.size()))];
  const int root = static_cast<int>(run.round % n);
  const size_t un = static_cast<size_t>(n), uc = static_cast<size_t>(count);
  auto ints = [&](size_t k, int salt) {
    std::vector<int> v(k);
    for (size_t i = 0; i < k; ++i) v[i] = static_cast<int>((run.seed(me, salt) + i * 31) % 1000) - 500;
    return v;
  };
  {
    std::vector<int> in = ints(uc, 40), got(uc), want(uc);
    const bool in_place = run.round % 3 == 0;
    if (in_place) got = in;
    MPI_Allreduce(in_place ? MPI_IN_PLACE : in.data(), got.data(), count, MPI_INT, MPI_SUM, comm);
    PMPI_Allreduce(in.data(), want.data(), count, MPI_INT, MPI_SUM, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Allreduce count " << count;
  }
  {
    std::vector<int> got = me == root ? ints(uc, 41) : std::vector<int>(uc, 7), want = got;
    MPI_Bcast(got.data(), count, MPI_INT, root, comm);
    PMPI_Bcast(want.data(), count, MPI_INT, root, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Bcast count " << count;
  }
  {
    std::vector<int> in = ints(uc, 42), got(uc, 3), want(uc, 3);
    MPI_Reduce(in.data(), got.data(), count, MPI_INT, MPI_MAX, root, comm);
    PMPI_Reduce(in.data(), want.data(), count, MPI_INT, MPI_MAX, root, comm);
    if (me == root) EXPECT_TRUE(same_bytes(got, want)) << "Reduce count " << count;
  }
  {
    std::vector<int> in = ints(uc, 43), got(uc * un), want(uc * un);
    MPI_Allgather(in.data(), count, MPI_INT, got.data(), count, MPI_INT, comm);
    PMPI_Allgather(in.data(), count, MPI_INT, want.data(), count, MPI_INT, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Allgather count " << count;
  }
  {
    std::vector<int> in = ints(uc * un, 44), got(uc), want(uc);
    MPI_Reduce_scatter_block(in.data(), got.data(), count, MPI_INT, MPI_SUM, comm);
    PMPI_Reduce_scatter_block(in.data(), want.data(), count, MPI_INT, MPI_SUM, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Reduce_scatter_block count " << count;
  }
  {
    std::vector<int> recvcounts(un);
    for (int i = 0; i < n; ++i) recvcounts[static_cast<size_t>(i)] = count + i;
    int total = 0;
    for (int c : recvcounts) total += c;
    std::vector<int> in = ints(static_cast<size_t>(total), 45);
    std::vector<int> got(static_cast<size_t>(count + me)), want(got.size());
    MPI_Reduce_scatter(in.data(), got.data(), recvcounts.data(), MPI_INT, MPI_SUM, comm);
    PMPI_Reduce_scatter(in.data(), want.data(), recvcounts.data(), MPI_INT, MPI_SUM, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Reduce_scatter count " << count;
  }
  {
    const int per = std::max(1, count / 4);
    std::vector<int> in = ints(static_cast<size_t>(per) * un, 46), got(in.size()), want(in.size());
    MPI_Alltoall(in.data(), per, MPI_INT, got.data(), per, MPI_INT, comm);
    PMPI_Alltoall(in.data(), per, MPI_INT, want.data(), per, MPI_INT, comm);
    EXPECT_TRUE(same_bytes(got, want)) << "Alltoall count " << per;
  }
  run.calls += 7;
  {
    // Alltoallv of `type`: i + j + 1 (+ 0..2) instances between ranks i and j, with a gap of one instance between
    // blocks.
    auto between = [&](int i, int j) { return i + j + 1 + static_cast<int>(run.round % 3); };
    std::vector<int> scounts(un), sdispls(un), rcounts(un), rdispls(un);
    int sinstances = 0, rinstances = 0;
    for (int i = 0; i < n; ++i) {
      const size_t ui = static_cast<size_t>(i);
      scounts[ui] = between(me, i);
      rcounts[ui] = between(i, me);
      sdispls[ui] = sinstances + 1;
      rdispls[ui] = rinstances + 1;
      sinstances = sdispls[ui] + scounts[ui];
      rinstances = rdispls[ui] + rcounts[ui];
    }
    Typed out(type, sinstances, run.seed(me, 47));
    Typed got(type, rinstances, run.seed(me, 48));
    std::vector<char> want = got.image;
    MPI_Alltoallv(out.buf(), scounts.data(), sdispls.data(), type, got.buf(), rcounts.data(), rdispls.data(), type,
                  comm);
    PMPI_Alltoallv(out.buf(), scounts.data(), sdispls.data(), type, want.data() - got.span.lo, rcounts.data(),
                   rdispls.data(), type, comm);
    ++run.calls;
    EXPECT_TRUE(same_bytes(got.image, want)) << "Alltoallv round " << run.round;
  }
}

// A device round: typed Isend/Irecv between emulated device buffers, and MPI_Pack from one.
void device_exchange(MPI_Datatype type, int count, LongRun& run) {
  auto& e = emu();
  Typed out(type, count, run.seed(run.rank, 50)), in(type, count, run.seed(run.rank, 51));
  Typed sender(type, count, run.seed(run.left, 50));
  const std::vector<char> want = expected_receive(sender, in);
  char* dout = static_cast<char*>(e.device_alloc(out.image.size()));
  char* din = static_cast<char*>(e.device_alloc(in.image.size()));
  ASSERT_TRUE(dout && din);
  ASSERT_TRUE(e.upload(dout, out.image.data(), out.image.size()));
  ASSERT_TRUE(e.upload(din, in.image.data(), in.image.size()));
  int bytes = 0;
  PMPI_Type_size(type, &bytes);
  run.largest_device_message = std::max<int64_t>(run.largest_device_message, int64_t{bytes} * count);
  MPI_Request reqs[2];
  MPI_Irecv(din - in.span.lo, count, type, run.left, 16, MPI_COMM_WORLD, &reqs[0]);
  MPI_Isend(dout - out.span.lo, count, type, run.right, 16, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  run.calls += 3;
  std::vector<char> got(in.image.size());
  ASSERT_TRUE(e.download(got.data(), din, got.size()));
  EXPECT_TRUE(same_bytes(got, want)) << "device Isend/Irecv round " << run.round;

  const std::vector<char> lib = library_pack(out.buf(), count, type);
  std::vector<char> packed(lib.size());
  int pos = 0;
  MPI_Pack(dout - out.span.lo, count, type, packed.data(), static_cast<int>(packed.size()), &pos, MPI_COMM_WORLD);
  ++run.calls;
  EXPECT_TRUE(same_bytes(packed, lib)) << "device MPI_Pack round " << run.round;
  e.device_free(dout);
  e.device_free(din);
}

// One round: everything made in it is freed before it ends.
void round(LongRun& run, MPI_Datatype kept) {
  // Sizes up to about 160 KiB, so that staging buffers of 64 KiB and up meet the pool.
  const int scale = static_cast<int>(run.round % 5) * 3;
  const int count = run.round % 8 == 7 ? 400 + static_cast<int>(run.round % 3) * 100 : 2 + scale;
  MPI_Datatype type = make_type(run.round, scale, run);
  pack_unpack(type, count, run);

  MPI_Comm comm = MPI_COMM_NULL;
  switch (run.round % 3) {
    case 0: MPI_Comm_dup(MPI_COMM_WORLD, &comm); break;
    case 1: MPI_Comm_split(MPI_COMM_WORLD, 0, run.size - run.rank, &comm); break;   // reversed ranks
    default: MPI_Comm_split(MPI_COMM_WORLD, run.rank % 2, run.rank, &comm); break;  // evens and odds
  }
  ++run.calls;
  // Point-to-point on a communicator whose ranks are the world's (the reversed split maps them back).
  exchange(type, count, run.round % 3 == 0 ? comm : MPI_COMM_WORLD, run);
  exchange(kept, 3 + static_cast<int>(run.round % 4), MPI_COMM_WORLD, run);
  collectives(comm, type, run);
  if (run.round % 4 == 3) device_exchange(type, count, run);  // every other one a large message
  MPI_Comm_free(&comm);
  MPI_Type_free(&type);
  run.calls += 2;
}

struct Snapshot {
  Footprint f;
  int fds = 0;
  int64_t heap = 0;
  int64_t calls = 0;
};

Snapshot snapshot(const LongRun& run) { return {veneer::footprint(), open_fds(), heap_in_use(), run.calls}; }

void print(const char* what, const Snapshot& s, int rank) {
  const Footprint& f = s.f;
  std::printf(
      "rank %d %-9s calls %9lld: type cache %lld, staging %lld B in %lld, pinned %lld B, device %lld B, packers %lld, "
      "requests %lld (%lld detached), hierarchies %lld, fds %d, heap %lld B\n",
      rank, what, static_cast<long long>(s.calls), static_cast<long long>(f.type_cache_entries),
      static_cast<long long>(f.staging_bytes), static_cast<long long>(f.staging_buffers),
      static_cast<long long>(f.pinned_bytes), static_cast<long long>(f.device_bytes),
      static_cast<long long>(f.device_packers), static_cast<long long>(f.requests_tracked),
      static_cast<long long>(f.requests_detached), static_cast<long long>(f.hierarchies), s.fds,
      static_cast<long long>(s.heap));
  std::fflush(stdout);
}

TEST(LongRunTest, MixedCallsKeepVeneerFlat) {
  LongRun run;
  MPI_Comm_rank(MPI_COMM_WORLD, &run.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.size);
  run.left = (run.rank + run.size - 1) % run.size;
  run.right = (run.rank + 1) % run.size;
  const int64_t target = target_calls();
  const int64_t library_per_type = library_bytes_per_type();
  const Snapshot start = snapshot(run);

  // A type kept for the whole run (an application's long-lived face type).
  MPI_Datatype kept;
  MPI_Type_vector(5, 2, 3, MPI_DOUBLE, &kept);
  MPI_Type_commit(&kept);
  run.calls += 2;

  const int64_t warmup = std::max<int64_t>(target / 10, 1);
  Snapshot base;
  int64_t base_types = 0;
  bool warm = false;
  int64_t next_check = 0;
  int checks = 0;
  // The ranks agree on the smallest count (a library call), so all stop and
  // check together whatever each one counted.
  while (run.calls < target || !warm) {
    round(run, kept);
    ++run.round;
    // (and all stop at the first failure on any rank)
    const int64_t mine[2] = {run.calls, ::testing::Test::HasFailure() ? -1 : 0};
    int64_t least[2] = {0, 0};
    PMPI_Allreduce(mine, least, 2, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
    run.calls = least[0];
    if (least[1] < 0) {
      ADD_FAILURE() << "stopped after round " << run.round << ": a rank failed";
      break;
    }
    if (!warm && run.calls >= warmup && run.round >= 72) {
      warm = true;
      base = snapshot(run);
      base_types = run.types_committed;
      print("warm", base, run.rank);
      next_check = base.calls + std::max<int64_t>((target - base.calls) / 10, 1);
      continue;
    }
    if (warm && run.calls >= next_check) {
      next_check += std::max<int64_t>((target - base.calls) / 10, 1);
      const Snapshot now = snapshot(run);
      ++checks;
      print("checkpoint", now, run.rank);
      const Footprint& f = now.f;
      // Types and communicators made in a round are freed in it: back to the warm count.
      EXPECT_EQ(f.type_cache_entries, base.f.type_cache_entries) << "at " << now.calls << " calls";
      EXPECT_EQ(f.hierarchies, base.f.hierarchies) << "at " << now.calls << " calls";
      // Every request was completed or freed; a freed send may still be finishing.
      EXPECT_LE(f.requests_tracked, 2) << "at " << now.calls << " calls";
      // The pools hold at most their limits, and no more buffers than the largest message needs.
      EXPECT_LE(f.staging_bytes, f.staging_limit);
      EXPECT_LE(f.staging_bytes, 16 * std::max<int64_t>(run.largest_message, 64 << 10));
      EXPECT_LE(f.pinned_bytes, f.pinned_limit);
      EXPECT_LE(f.device_bytes, f.pinned_limit);
      EXPECT_LE(f.pinned_bytes + f.device_bytes, 64 * std::max<int64_t>(run.largest_device_message, 64 << 10));
      EXPECT_LE(f.device_packers, 4) << "device packers at " << now.calls << " calls";  // a freed type's go with it
      EXPECT_EQ(now.fds, base.fds) << "file descriptors at " << now.calls << " calls";
      // The heap in use may move by what malloc keeps in flight, but not with
      // the number of calls (beyond what the library keeps per type without Veneer).
      const int64_t library_growth = library_per_type * (run.types_committed - base_types);
      EXPECT_LE(now.heap - base.heap - library_growth, int64_t{1} << 20)
          << "heap growth at " << now.calls << " calls (" << library_growth << " B the library's own)";
    }
  }
  MPI_Type_free(&kept);
  ++run.calls;
  const Snapshot end = snapshot(run);
  print("end", end, run.rank);
  EXPECT_GE(checks, 10);
  EXPECT_GE(end.calls, target);
  // Nothing of the run's is left: the kept type left the cache, the hierarchies are back to where they started.
  EXPECT_EQ(end.f.type_cache_entries, base.f.type_cache_entries - 1);
  EXPECT_EQ(end.f.hierarchies, start.f.hierarchies);
  std::printf(
      "rank %d long run: %lld calls (and %lld polls that completed nothing) in %lld rounds on %d ranks; "
      "the library alone keeps %lld B per type committed\n",
      run.rank, static_cast<long long>(end.calls), static_cast<long long>(run.polls), static_cast<long long>(run.round),
      run.size, static_cast<long long>(library_per_type));
}

}  // namespace
