// SPDX-License-Identifier: BSD-3-Clause
// Several threads per rank under MPI_THREAD_MULTIPLE, each on its own
// communicator: typed sends and receives of non-contiguous types (taken over
// by Veneer), MPI_Pack/Unpack, MPI_Alltoallw, collectives, and derived types created, used
// and freed every round while the other threads look theirs up (the type
// cache, its delete callback and the per-thread fronts). Every result is
// checked against the library (PMPI_Pack/PMPI_Unpack) or a hand-written
// reference. Run under ThreadSanitizer in CI (test/threads/README.md).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/collectives.h"
#include "support/config.h"
#include "support/counters.h"
#include "test/mpi/ranks.h"

namespace {

namespace alg = veneer::algorithms;
using veneer::Counter;
using veneer::counters;

constexpr int kThreads = 4;

int rounds() {
  const char* v = std::getenv("VENEER_TEST_THREAD_ROUNDS");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 12;
}

bool thread_multiple() {
  int provided = 0;
  PMPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

// One derived type of a small menu, chosen by `which`; every rank builds the
// same one for the same (thread, round). Blocks of 2-24 bytes: Veneer takes
// the sends over (VENEER_P2P_MAX_BLOCK=1M in the tests' environment).
MPI_Datatype make_type(int which, int t) {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  switch (which % 7) {
    case 0: MPI_Type_vector(50 + t, 1, 3, MPI_DOUBLE, &type); break;
    case 1: MPI_Type_create_hvector(40, 3, 20, MPI_INT, &type); break;
    case 2: {
      int lens[5] = {1, 3, 2, 5, 1};
      int displs[5] = {0, 4, 11, 17, 30 + t};
      MPI_Type_indexed(5, lens, displs, MPI_INT, &type);
      break;
    }
    case 3: {
      int lens[3] = {1, 1, 2};
      MPI_Aint displs[3] = {0, 8, 20};
      MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
      MPI_Datatype s, r;
      MPI_Type_create_struct(3, lens, displs, types, &s);
      MPI_Type_create_resized(s, 0, 24, &r);
      MPI_Type_contiguous(30, r, &type);
      MPI_Type_free(&s);
      MPI_Type_free(&r);
      break;
    }
    case 4: {
      int sizes[2] = {20, 16}, sub[2] = {10, 5}, start[2] = {3, 4 + t % 3};
      MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &type);
      break;
    }
    case 5: {
      int displs[6] = {1, 5, 6, 12, 20, 27};
      MPI_Type_create_indexed_block(6, 2, displs, MPI_SHORT, &type);
      break;
    }
    default: {
      MPI_Datatype inner;
      MPI_Type_vector(4, 1, 2, MPI_FLOAT, &inner);
      MPI_Type_create_hvector(12, 1, 40, inner, &type);
      MPI_Type_free(&inner);
      break;
    }
  }
  MPI_Type_commit(&type);
  return type;
}

// Bytes covered by `count` instances of `type` from its buffer start (lower bounds are 0 here).
size_t span_of(MPI_Datatype type, int count) {
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  return static_cast<size_t>(true_lb + true_extent + (count - 1) * extent);
}

std::vector<unsigned char> bytes_of(size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<unsigned char>(x >> 16);
  }
  return v;
}

std::vector<unsigned char> library_pack(const void* buf, int count, MPI_Datatype type, MPI_Comm comm) {
  int size = 0;
  PMPI_Pack_size(count, type, comm, &size);
  std::vector<unsigned char> out(static_cast<size_t>(size));
  int pos = 0;
  PMPI_Pack(buf, count, type, out.data(), size, &pos, comm);
  out.resize(static_cast<size_t>(pos));
  return out;
}

// What a receive of `count` x `type` into a buffer of `fill` must leave: the
// library's unpack of the library's pack of the sender's buffer.
std::vector<unsigned char> expected_receive(const std::vector<unsigned char>& sent, std::vector<unsigned char> fill,
                                            int count, MPI_Datatype type, MPI_Comm comm) {
  auto packed = library_pack(sent.data(), count, type, comm);
  int pos = 0;
  PMPI_Unpack(packed.data(), static_cast<int>(packed.size()), &pos, fill.data(), count, type, comm);
  return fill;
}

// Each thread counts its own failures; the test thread reports them.
struct Failures {
  int p2p = 0, pack = 0, collectives = 0, calls = 0;
  std::string first;
  void note(int& counter, const std::string& what) {
    if (counter++ == 0 && first.empty()) first = what;
  }
};

uint32_t seed_of(int rank, int t, int r, int salt) {
  return static_cast<uint32_t>(((rank * 131 + t) * 1009 + r) * 17 + salt);
}

// Send buffers of requests freed with MPI_Request_free: kept until a later
// collective on the same communicator shows the receiver has the data.
using Kept = std::vector<std::vector<unsigned char>>;

// One typed exchange around the ring of `comm`, in one of five ways.
void exchange(MPI_Comm comm, int t, int r, MPI_Datatype type, int count, Failures& f, Kept& kept) {
  const int me = rank_of(comm), p = size_of(comm);
  const int right = (me + 1) % p, left = (me + p - 1) % p;
  const size_t span = span_of(type, count);
  const auto src = bytes_of(span, seed_of(me, t, r, 1));
  const auto fill = bytes_of(span, seed_of(me, t, r, 2));
  auto dst = fill;
  const int tag = 100 + r;
  int rc = MPI_SUCCESS;
  MPI_Status status;
  switch (r % 5) {
    case 0: {
      MPI_Request q[2];
      rc |= MPI_Irecv(dst.data(), count, type, left, tag, comm, &q[0]);
      rc |= MPI_Isend(src.data(), count, type, right, tag, comm, &q[1]);
      MPI_Status st[2];
      rc |= MPI_Waitall(2, q, st);
      status = st[0];
      break;
    }
    case 1:
      rc |= MPI_Sendrecv(src.data(), count, type, right, tag, dst.data(), count, type, left, tag, comm, &status);
      break;
    case 2: {
      MPI_Request q;
      rc |= MPI_Irecv(dst.data(), count, type, left, tag, comm, &q);
      rc |= MPI_Send(src.data(), count, type, right, tag, comm);
      rc |= MPI_Wait(&q, &status);
      break;
    }
    case 4: {
      // A freed send request: Veneer keeps it and finishes it in a later
      // completion call, possibly on another thread (requests::progress_detached).
      kept.push_back(src);
      MPI_Request q;
      rc |= MPI_Isend(kept.back().data(), count, type, right, tag, comm, &q);
      rc |= MPI_Request_free(&q);
      rc |= MPI_Recv(dst.data(), count, type, left, tag, comm, &status);
      break;
    }
    default: {
      MPI_Request q[2];
      rc |= MPI_Isend(src.data(), count, type, right, tag, comm, &q[0]);
      rc |= MPI_Irecv(dst.data(), count, type, left, tag, comm, &q[1]);
      for (int done = 0; done < 2;) {
        int index = MPI_UNDEFINED, flag = 0;
        MPI_Status st;
        rc |= MPI_Testany(2, q, &index, &flag, &st);
        if (flag && index != MPI_UNDEFINED) {
          ++done;
          if (index == 1) status = st;
        } else {
          std::this_thread::yield();
        }
      }
      break;
    }
  }
  if (rc != MPI_SUCCESS) f.note(f.calls, "a send or receive failed");
  const auto sent = bytes_of(span, seed_of(left, t, r, 1));
  if (dst != expected_receive(sent, fill, count, type, comm))
    f.note(f.p2p, "received data differs, thread " + std::to_string(t) + " round " + std::to_string(r));
  int elements = -1;
  PMPI_Get_count(&status, type, &elements);
  if (status.MPI_SOURCE != left || status.MPI_TAG != tag || elements != count)
    f.note(f.p2p, "status differs, thread " + std::to_string(t) + " round " + std::to_string(r));
}

// MPI_Pack / MPI_Unpack through Veneer against the library's own.
void pack_round(MPI_Comm comm, int t, int r, MPI_Datatype type, int count, Failures& f) {
  const size_t span = span_of(type, count);
  const auto src = bytes_of(span, seed_of(rank_of(comm), t, r, 3));
  const auto lib = library_pack(src.data(), count, type, comm);
  std::vector<unsigned char> ours(lib.size() + 16, 0xA5);
  int pos = 16;  // an offset inside the packed buffer, as users append
  if (MPI_Pack(src.data(), count, type, ours.data(), static_cast<int>(ours.size()), &pos, comm) != MPI_SUCCESS ||
      pos != static_cast<int>(ours.size()) || !std::equal(lib.begin(), lib.end(), ours.begin() + 16))
    f.note(f.pack, "MPI_Pack differs, thread " + std::to_string(t) + " round " + std::to_string(r));
  const auto fill = bytes_of(span, seed_of(rank_of(comm), t, r, 4));
  auto back = fill, lib_back = fill;
  pos = 16;
  MPI_Unpack(ours.data(), static_cast<int>(ours.size()), &pos, back.data(), count, type, comm);
  pos = 0;
  PMPI_Unpack(lib.data(), static_cast<int>(lib.size()), &pos, lib_back.data(), count, type, comm);
  if (back != lib_back)
    f.note(f.pack, "MPI_Unpack differs, thread " + std::to_string(t) + " round " + std::to_string(r));
}

// MPI_Alltoallw with the round's type (taken over: VENEER_ALLTOALL_MAX_BLOCK=1M)
// against the library's own on the same buffers.
void alltoallw_round(MPI_Comm comm, int t, int r, MPI_Datatype type, int count, Failures& f) {
  const int me = rank_of(comm), p = size_of(comm);
  const size_t span = span_of(type, count);
  const auto src = bytes_of(span * static_cast<size_t>(p), seed_of(me, t, r, 5));
  const auto fill = bytes_of(span * static_cast<size_t>(p), seed_of(me, t, r, 6));
  auto ours = fill, lib = fill;
  std::vector<int> counts(static_cast<size_t>(p), count), displs(static_cast<size_t>(p));
  std::vector<MPI_Datatype> types(static_cast<size_t>(p), type);
  for (int q = 0; q < p; ++q) displs[static_cast<size_t>(q)] = q * static_cast<int>(span);
  if (MPI_Alltoallw(src.data(), counts.data(), displs.data(), types.data(), ours.data(), counts.data(), displs.data(),
                    types.data(), comm) != MPI_SUCCESS)
    f.note(f.calls, "alltoallw");
  PMPI_Alltoallw(src.data(), counts.data(), displs.data(), types.data(), lib.data(), counts.data(), displs.data(),
                 types.data(), comm);
  if (ours != lib)
    f.note(f.collectives, "alltoallw differs, thread " + std::to_string(t) + " round " + std::to_string(r));
}

long value(int rank, int t, int r, long i) { return (rank + 1) * 1000003L + t * 7919L + r * 131L + i * 3L; }

// Allreduce, Bcast, Reduce, Allgather, Reduce_scatter_block, Reduce_scatter
// and Alltoall on `comm`, small and large, against hand-written results.
void collectives_round(MPI_Comm comm, int t, int r, Failures& f) {
  const int me = rank_of(comm), p = size_of(comm);
  const std::string where = " thread " + std::to_string(t) + " round " + std::to_string(r);
  for (const int n : {7, 1500 + 32 * (r % 3)}) {
    std::vector<long> in(static_cast<size_t>(n) * static_cast<size_t>(p)), out(in.size(), -1), want(in.size(), 0);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(me, t, r, static_cast<long>(i));
    auto sum_over_ranks = [&](size_t i) {
      long s = 0;
      for (int q = 0; q < p; ++q) s += value(q, t, r, static_cast<long>(i));
      return s;
    };
    // Allreduce
    if (MPI_Allreduce(in.data(), out.data(), n, MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS) f.note(f.calls, "allreduce");
    for (int i = 0; i < n; ++i)
      if (out[static_cast<size_t>(i)] != sum_over_ranks(static_cast<size_t>(i))) {
        f.note(f.collectives, "allreduce" + where);
        break;
      }
    // Reduce to a root that moves with the round
    const int root = r % p;
    std::fill(out.begin(), out.end(), -1);
    if (MPI_Reduce(in.data(), out.data(), n, MPI_LONG, MPI_SUM, root, comm) != MPI_SUCCESS) f.note(f.calls, "reduce");
    if (me == root)
      for (int i = 0; i < n; ++i)
        if (out[static_cast<size_t>(i)] != sum_over_ranks(static_cast<size_t>(i))) {
          f.note(f.collectives, "reduce" + where);
          break;
        }
    // Bcast from the root
    std::vector<long> b(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) b[static_cast<size_t>(i)] = me == root ? value(root, t, r, i) : -1;
    if (MPI_Bcast(b.data(), n, MPI_LONG, root, comm) != MPI_SUCCESS) f.note(f.calls, "bcast");
    for (int i = 0; i < n; ++i)
      if (b[static_cast<size_t>(i)] != value(root, t, r, i)) {
        f.note(f.collectives, "bcast" + where);
        break;
      }
    // Allgather: n longs from every rank
    std::fill(out.begin(), out.end(), -1);
    if (MPI_Allgather(in.data(), n, MPI_LONG, out.data(), n, MPI_LONG, comm) != MPI_SUCCESS)
      f.note(f.calls, "allgather");
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < n; ++i)
        if (out[static_cast<size_t>(q * n + i)] != value(q, t, r, i)) {
          f.note(f.collectives, "allgather" + where);
          q = p;
          break;
        }
    // Reduce_scatter_block: n longs each of the p*n summed
    std::fill(out.begin(), out.end(), -1);
    if (MPI_Reduce_scatter_block(in.data(), out.data(), n, MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS)
      f.note(f.calls, "reduce_scatter_block");
    for (int i = 0; i < n; ++i)
      if (out[static_cast<size_t>(i)] != sum_over_ranks(static_cast<size_t>(me * n + i))) {
        f.note(f.collectives, "reduce_scatter_block" + where);
        break;
      }
    // Reduce_scatter with uneven counts (rank q gets n - q)
    std::vector<int> counts(static_cast<size_t>(p));
    int before = 0;
    for (int q = 0; q < p; ++q) {
      counts[static_cast<size_t>(q)] = n - q;
      if (q < me) before += n - q;
    }
    std::fill(out.begin(), out.end(), -1);
    if (MPI_Reduce_scatter(in.data(), out.data(), counts.data(), MPI_LONG, MPI_SUM, comm) != MPI_SUCCESS)
      f.note(f.calls, "reduce_scatter");
    for (int i = 0; i < counts[static_cast<size_t>(me)]; ++i)
      if (out[static_cast<size_t>(i)] != sum_over_ranks(static_cast<size_t>(before + i))) {
        f.note(f.collectives, "reduce_scatter" + where);
        break;
      }
    // Alltoall: block q of my input goes to rank q
    std::fill(out.begin(), out.end(), -1);
    if (MPI_Alltoall(in.data(), n, MPI_LONG, out.data(), n, MPI_LONG, comm) != MPI_SUCCESS) f.note(f.calls, "alltoall");
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < n; ++i)
        if (out[static_cast<size_t>(q * n + i)] != value(q, t, r, me * n + i)) {
          f.note(f.collectives, "alltoall" + where);
          q = p;
          break;
        }
  }
}

}  // namespace

// Every thread works on its own duplicate of MPI_COMM_WORLD (made by the
// main thread, in the same order on every rank) and, inside, duplicates and
// frees one more communicator of its own every few rounds, concurrently with
// the others: Veneer builds hierarchies and forgets decisions meanwhile.
TEST(Threads, TypedTrafficPackAndCollectivesOnDistinctCommunicators) {
  if (!thread_multiple()) GTEST_SKIP() << "the library gave no MPI_THREAD_MULTIPLE";
  const int n_rounds = rounds();
  // A type every thread uses at once (its layout lands in every thread's front).
  MPI_Datatype shared = make_type(0, 0);
  MPI_Comm comms[kThreads];
  for (auto& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
  const uint64_t sends_before = counters().get(Counter::send_taken);
  const uint64_t packs_before = counters().get(Counter::pack_taken);
  const uint64_t alltoalls_before = counters().get(Counter::alltoall_taken);
  Failures failures[kThreads];
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, n_rounds, shared, &comms, &failures] {
      Failures& f = failures[t];
      Kept kept;
      MPI_Comm mine = MPI_COMM_NULL;
      for (int r = 0; r < n_rounds; ++r) {
        if (r % 4 == 0) {
          if (mine != MPI_COMM_NULL) MPI_Comm_free(&mine);
          MPI_Comm_dup(comms[t], &mine);
        }
        // A type of this round, created, used and freed while the others do the same.
        MPI_Datatype type = make_type(t + r, t);
        const int count = 1 + r % 3;
        exchange(comms[t], t, r, type, count, f, kept);
        pack_round(comms[t], t, r, type, count, f);
        alltoallw_round(comms[t], t, r, type, count, f);
        // A duplicate of the shared type (known to Veneer through Type_dup), and the shared type itself.
        MPI_Datatype dup = MPI_DATATYPE_NULL;
        MPI_Type_dup(shared, &dup);
        exchange(mine, t, r, dup, 2, f, kept);
        pack_round(mine, t, r, shared, 1, f);
        MPI_Type_free(&dup);
        MPI_Type_free(&type);
        collectives_round(r % 2 ? mine : comms[t], t, r, f);
        // Both exchanges' receivers (same thread number on the neighbours, whose
        // previous calls on `mine` and comms[t] came before this collective) have their data.
        kept.clear();
      }
      MPI_Comm_free(&mine);
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) {
    const Failures& f = failures[t];
    EXPECT_EQ(f.calls, 0) << "thread " << t << ": " << f.first;
    EXPECT_EQ(f.p2p, 0) << "thread " << t << ": " << f.first;
    EXPECT_EQ(f.pack, 0) << "thread " << t << ": " << f.first;
    EXPECT_EQ(f.collectives, 0) << "thread " << t << ": " << f.first;
  }
  // The traffic went through Veneer (counted while VENEER_REPORT is on).
  if (veneer::config().report != 0 && veneer::config().enabled) {
    EXPECT_GT(counters().get(Counter::send_taken), sends_before) << "no send was taken over";
    EXPECT_GT(counters().get(Counter::pack_taken), packs_before) << "no pack was taken over";
    EXPECT_GT(counters().get(Counter::alltoall_taken), alltoalls_before) << "no alltoallw was taken over";
  }
  for (auto& c : comms) MPI_Comm_free(&c);
  MPI_Type_free(&shared);
}

// With VENEER_<COLLECTIVE> forcing Veneer's own algorithms (the .forced
// registrations), each collective above ran them at least once on some thread.
TEST(Threads, ForcedAlgorithmsRan) {
  if (!thread_multiple()) GTEST_SKIP() << "the library gave no MPI_THREAD_MULTIPLE";
  if (veneer::config().report == 0 || size_of(MPI_COMM_WORLD) < 2) GTEST_SKIP() << "needs VENEER_REPORT and 2 ranks";
  const std::pair<const char*, alg::Collective> forced[] = {
      {"VENEER_ALLREDUCE", alg::Collective::allreduce},
      {"VENEER_BCAST", alg::Collective::bcast},
      {"VENEER_REDUCE", alg::Collective::reduce},
      {"VENEER_ALLGATHER", alg::Collective::allgather},
      {"VENEER_REDUCE_SCATTER_BLOCK", alg::Collective::reduce_scatter_block},
      {"VENEER_REDUCE_SCATTER", alg::Collective::reduce_scatter},
      {"VENEER_ALLTOALL", alg::Collective::alltoall}};
  int checked = 0;
  for (const auto& [variable, collective] : forced) {
    const char* value = std::getenv(variable);
    if (!value || std::string(value).find("library") != std::string::npos) continue;
    uint64_t ours = 0;
    for (const auto& e : alg::collectives_counts())
      if (e.collective == collective && e.algorithm != "library") ours += e.calls;
    EXPECT_GT(ours, 0u) << variable << "=" << value << " but none of Veneer's algorithms ran";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no collective forced";
}
