// SPDX-License-Identifier: BSD-3-Clause
// Collective entry points: each asks algorithms/ to run the call with one of
// Veneer's algorithms; when it declines (nullopt) the call goes, unchanged, to
// the library. VENEER_COLLECTIVES=0 (or VENEER_DISABLE=1) passes everything through.
#include "algorithms/collectives.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "datatypes/cache.h"
#include "interposer/device.h"
#include "interposer/forward.h"
#include "interposer/noted_comms.h"
#include "interposer/switchboard.h"
#include "support/config.h"
#include "support/counters.h"

using namespace veneer;
namespace alg = veneer::algorithms;

namespace veneer {
void collectives_start() {
  alg::collectives_init();
  alg::set_comm_freed_hook(&forget_noted);
}
void collectives_stop() { alg::collectives_finalize(); }
std::string collectives_report_text() {
  // Every rank chose the same algorithm for every call, so rank 0's counts speak for all.
  return alg::collectives_report();
}
}  // namespace veneer

namespace {
bool on() { return takes_collective(config()); }
// Whether surely_library may answer calls now: quick answers wanted (no
// report, which counts per algorithm) and no buffer can be device memory,
// or collectives are switched off (the library then serves device buffers too).
[[gnu::always_inline]] inline bool quick_path_open() {
  const Config& c = config();
  return c.collectives_quick && (!takes_collective(c) || !device_byte_down(c));
}

// Device buffers are staged through pinned host memory (below) and the same
// collective runs on the host copies, with Veneer's algorithms where they are
// chosen. Device memory Veneer cannot stage goes to the library.
//
// A call the library serves is marked for the quick path (surely_library),
// where the quick path may answer it: later calls with the same arguments
// skip all of this. `call` null: calls that are never remembered.
template <class Run, class Pass>
int route(const alg::Call* call, MPI_Comm comm, const void* a, const void* b, Run run, Pass pass) {
  if (on() && cpu_accessible(a, b)) {
    if (auto rc = run()) {
      counters().add(Counter::coll_taken);
      return *rc;
    }
    if (call) alg::answer_quickly(alg::decision_key(*call, comm), quick_path_open);
  } else if (call && on()) {
    // Device memory this rank does not stage: the library's. Other ranks
    // of the call may hold host buffers and reach the communicator's first
    // decision, which passes the call undecided and marks it seen: so here.
    alg::seen_undecided(*call, comm);
  } else if (call && !on()) {
    // Switched off (VENEER_DISABLE, VENEER_COLLECTIVES): the library serves
    // every call, so this one is remembered as the library's and marked, and
    // the next one like it costs the quick path's lookup alone (through this
    // function every time, a switched-off collective cost 3-5 ns over the
    // library at 1 rank, against 2.5-3.8 ns). A switch turned back on
    // rereads the configuration, which moves the epoch and ends the marks.
    const alg::DecisionKey key = alg::decision_key(*call, comm);
    alg::remember_decision(key, {});
    alg::answer_quickly(key, quick_path_open);
  }
  counters().add(Counter::coll_passed);
  return pass();
}
// A host copy of the part of a device buffer that a collective reads or
// writes: `count` instances of its type. Read in at construction when
// `input`; written back by flush(). A contiguous type's bytes are copied as
// they are; any other type's whole span is copied in and back, so that its
// gaps come back with the values they had.
class Mirror {
 public:
  bool ok = true;
  // Null `buf`, count 0, or host memory: no mirror, host() is `buf` itself.
  Mirror(void* buf, int64_t count, MPI_Datatype type, bool input) : user_(buf) {
    if (!buf || buf == MPI_IN_PLACE || count <= 0 || !device::is_device(buf)) return;
    auto layout = datatypes::lookup(type);
    kernels::DeviceRuntime* rt = kernels::device_runtime();
    if (!layout || layout->size <= 0 || !rt) {
      ok = false;
      return;
    }
    const datatypes::Span span = layout->span(count);
    lo_ = span.low;
    bytes_ = span.bytes;
    if (!layout->contiguous) input = true;  // the gaps come back as they were
    staging_ = kernels::PooledBuffer(*rt, kernels::PooledBuffer::Kind::pinned, static_cast<size_t>(bytes_));
    if (!staging_.get()) {
      ok = false;
      return;
    }
    if (input) ok = device::copy_bytes(staging_.get(), offset_ptr(buf, lo_), bytes_);
  }
  void* host() const { return staging_.get() ? offset_ptr(staging_.get(), -lo_) : user_; }
  bool mirrored() const { return staging_.get() != nullptr; }
  bool flush() const { return !mirrored() || device::copy_bytes(offset_ptr(user_, lo_), staging_.get(), bytes_); }

 private:
  void* user_;
  int64_t lo_ = 0, bytes_ = 0;
  kernels::PooledBuffer staging_;
};

// Whether a call with these buffers is staged: a device buffer and device
// paths on. Staged whether or not the library is CUDA-aware: other ranks of
// the same call may hold host buffers and run one of Veneer's algorithms,
// and every rank must run the same one, so the choice cannot depend on
// where this rank's buffers live.
bool staging_possible() { return on() && carries_device(config()) && kernels::device_memory_possible(); }
bool needs_staging(const void* a, const void* b) {
  if (!staging_possible()) return false;
  return (a && a != MPI_IN_PLACE && device::is_device(a)) || (b && b != MPI_IN_PLACE && device::is_device(b));
}

// Runs `call(send_host, recv_host)` on mirrors of the device buffers and
// writes the receive mirror back. `recv_is_input`: the receive buffer is read
// too (in place, Bcast). Returns nullopt if a mirror could not be made (the
// caller passes through: nothing has been sent yet).
template <class Call>
std::optional<int> staged(const void* sbuf, int64_t scount, MPI_Datatype stype, void* rbuf, int64_t rcount,
                          MPI_Datatype rtype, bool recv_is_input, Call call) {
  Mirror s(const_cast<void*>(sbuf), scount, stype, true);
  Mirror r(rbuf, rcount, rtype, recv_is_input);
  if (!s.ok || !r.ok || (!s.mirrored() && !r.mirrored())) return std::nullopt;
  const void* shost = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.host();
  int rc = call(shost, r.host());
  if (rc == MPI_SUCCESS && !r.flush()) rc = MPI_ERR_INTERN;
  counters().add(Counter::device_staged);
  return rc;
}

// The combiner of a staged reduction: on the device with
// VENEER_DEVICE_REDUCE=device (interposer/device_reduce.cpp), else none (the
// host's PMPI_Reduce_local). Installed around the call on the host mirrors,
// where Veneer's algorithms combine; the library's own algorithm, when it is
// chosen, combines on the host as before.
alg::Combiner staged_combiner() { return device::combine_on_device_wanted() ? &device::combine_on_device : nullptr; }

// A reduction staged: staged() with one type and the staged combiner installed around `call`.
template <class Call>
std::optional<int> staged_reduction(const void* sbuf, int64_t scount, void* rbuf, int64_t rcount, MPI_Datatype type,
                                    bool recv_is_input, Call call) {
  return staged(sbuf, scount, type, rbuf, rcount, type, recv_is_input, [&](const void* s, void* r) {
    const alg::ScopedCombiner combine(staged_combiner());
    return call(s, r);
  });
}

// Reduce_scatter(_block) staged: the send buffer holds `total` elements,
// this rank receives `mine` (in place, the receive buffer holds the whole input).
template <class Call>
std::optional<int> staged_scatter(const void* sbuf, void* rbuf, int64_t total, int64_t mine, MPI_Datatype type,
                                  Call call) {
  const bool in_place = sbuf == MPI_IN_PLACE;
  return staged_reduction(sbuf, total, rbuf, in_place ? total : mine, type, in_place, call);
}

int comm_size(MPI_Comm comm) {
  int p = 0;
  if (PMPI_Comm_size(comm, &p) != MPI_SUCCESS) return 0;
  return p;
}
int comm_rank(MPI_Comm comm) {
  int r = 0;
  if (PMPI_Comm_rank(comm, &r) != MPI_SUCCESS) return -1;
  return r;
}
bool intercomm(MPI_Comm comm) {
  int inter = 0;
  return comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter;
}

}  // namespace

[[gnu::noinline]] static int allreduce_slow(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                            MPI_Comm comm) {
  const alg::Call call{.collective = alg::Collective::allreduce, .sbuf = sbuf, .count = count, .type = type, .op = op};
  if (needs_staging(sbuf, rbuf) && !intercomm(comm)) {
    if (auto rc = staged_reduction(sbuf, count, rbuf, count, type, sbuf == MPI_IN_PLACE,
                                   [&](const void* s, void* r) { return MPI_Allreduce(s, r, count, type, op, comm); }))
      return *rc;
  }
  return route(
      &call, comm, sbuf, rbuf, [&] { return alg::allreduce(sbuf, rbuf, count, type, op, comm); },
      [&] { return next::Allreduce(sbuf, rbuf, count, type, op, comm); });
}

[[gnu::noinline]] static int bcast_slow(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  const alg::Call call{.collective = alg::Collective::bcast, .count = count, .type = type, .root = root};
  if (needs_staging(buf, buf) && !intercomm(comm)) {
    const bool is_root = comm_rank(comm) == root;
    // The root's buffer is read, everyone else's written: one mirror, read in at the root.
    Mirror m(buf, count, type, is_root);
    if (m.ok && m.mirrored()) {
      int rc = MPI_Bcast(m.host(), count, type, root, comm);
      if (rc == MPI_SUCCESS && !is_root && !m.flush()) rc = MPI_ERR_INTERN;
      counters().add(Counter::device_staged);
      return rc;
    }
  }
  return route(
      &call, comm, buf, buf, [&] { return alg::bcast(buf, count, type, root, comm); },
      [&] { return next::Bcast(buf, count, type, root, comm); });
}

[[gnu::noinline]] static int reduce_slow(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                         int root, MPI_Comm comm) {
  const alg::Call call{
      .collective = alg::Collective::reduce, .sbuf = sbuf, .count = count, .type = type, .op = op, .root = root};
  if (staging_possible() && !intercomm(comm)) {
    const bool is_root = comm_rank(comm) == root;
    // The receive buffer matters at the root only (elsewhere it may be anything).
    void* rb = is_root ? rbuf : nullptr;
    if (needs_staging(sbuf, rb)) {
      if (auto rc = staged_reduction(sbuf, count, rb, count, type, sbuf == MPI_IN_PLACE, [&](const void* s, void* r) {
            return MPI_Reduce(s, is_root ? r : rbuf, count, type, op, root, comm);
          }))
        return *rc;
    }
  }
  return route(
      &call, comm, sbuf, rbuf, [&] { return alg::reduce(sbuf, rbuf, count, type, op, root, comm); },
      [&] { return next::Reduce(sbuf, rbuf, count, type, op, root, comm); });
}

// `total`: the counts' sum (algorithms::scatter_total), by which the
// decision is remembered and marked for the quick path; without one, decided afresh.
[[gnu::noinline]] static int reduce_scatter_slow(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type,
                                                 MPI_Op op, MPI_Comm comm, std::optional<int> total) {
  const alg::Call call{.collective = alg::Collective::reduce_scatter,
                       .sbuf = sbuf,
                       .count = total.value_or(0),
                       .type = type,
                       .rcounts = rcounts,
                       .op = op};
  if (total && needs_staging(sbuf, rbuf) && !intercomm(comm)) {
    const int me = comm_rank(comm);
    if (me >= 0) {
      if (auto rc = staged_scatter(sbuf, rbuf, *total, rcounts[me], type, [&](const void* s, void* r) {
            return MPI_Reduce_scatter(s, r, rcounts, type, op, comm);
          }))
        return *rc;
    }
  }
  const int rc = route(
      total ? &call : nullptr, comm, sbuf, rbuf,
      [&] { return alg::reduce_scatter(sbuf, rbuf, rcounts, type, op, comm); },
      [&] { return next::Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm); });
  // Marked for the quick path: its size is kept once the communicator is
  // watched (a decision remembered while collectives are switched off
  // watches nothing).
  if (total && alg::recall_marked(alg::decision_key(call, comm)).quick && alg::watch_communicator(comm))
    if (const int p = comm_size(comm); p > 0) note(comm, CommFact::size, p, p);
  return rc;
}

[[gnu::noinline]] static int reduce_scatter_block_slow(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type,
                                                       MPI_Op op, MPI_Comm comm) {
  const alg::Call call{
      .collective = alg::Collective::reduce_scatter_block, .sbuf = sbuf, .count = rcount, .type = type, .op = op};
  if (needs_staging(sbuf, rbuf) && !intercomm(comm)) {
    if (auto rc = staged_scatter(
            sbuf, rbuf, int64_t{rcount} * comm_size(comm), rcount, type,
            [&](const void* s, void* r) { return MPI_Reduce_scatter_block(s, r, rcount, type, op, comm); }))
      return *rc;
  }
  return route(
      &call, comm, sbuf, rbuf, [&] { return alg::reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm); },
      [&] { return next::Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm); });
}

// Allgather and Alltoall take the same arguments; Alltoall's send buffer
// holds a block for every rank, Allgather's one.
template <alg::Collective kind>
[[gnu::noinline]] static int exchange_slow(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                           MPI_Datatype rtype, MPI_Comm comm) {
  constexpr bool alltoall = kind == alg::Collective::alltoall;
  const alg::Call call{
      .collective = kind, .sbuf = sbuf, .count = rcount, .type = rtype, .scount = scount, .stype = stype};
  if (needs_staging(sbuf, rbuf) && !intercomm(comm)) {
    const int p = comm_size(comm);
    if (auto rc = staged(sbuf, alltoall ? int64_t{scount} * p : scount, stype, rbuf, int64_t{rcount} * p, rtype,
                         sbuf == MPI_IN_PLACE, [&](const void* s, void* r) {
                           return (alltoall ? MPI_Alltoall : MPI_Allgather)(s, scount, stype, r, rcount, rtype, comm);
                         }))
      return *rc;
  }
  return route(
      &call, comm, sbuf, rbuf,
      [&] { return (alltoall ? alg::alltoall : alg::allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm); },
      [&] { return (alltoall ? next::Alltoall : next::Allgather)(sbuf, scount, stype, rbuf, rcount, rtype, comm); });
}

// ---- The entry points ---------------------------------------------------------
// The common case first, in a few instructions and without a stack frame:
// this thread already gave calls with these arguments to the library, with
// Veneer on, no buffer in this process possibly device memory and no report
// wanted (route() marked the decision so; a change of any of those moves
// the epoch the mark is stamped with); or, from the same lookup, a decision
// whose choice depends on the call's pattern gives this pattern to the
// library. Everything else goes the full way (the *_slow functions).
namespace {
[[gnu::always_inline]] inline bool surely_library(const alg::Call& call, MPI_Comm comm) {
  const alg::Recalled r = alg::recall_marked(alg::decision_key(call, comm));
  if (r.quick) [[likely]]
    return true;
  // Not marked: a decision whose choice depends on the call's pattern (a
  // moved root, the first call since a barrier), the library for this
  // call's pattern, noting the root and the barriers for the next call.
  return r.decision && r.decision->varies && quick_path_open() && r.decision->library_for(call.root);
}

// Allgather and Alltoall, inlined into each entry point.
template <alg::Collective kind>
[[gnu::always_inline]] inline int exchange(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                           MPI_Datatype rtype, MPI_Comm comm) {
  if (surely_library(
          {.collective = kind, .sbuf = sbuf, .count = rcount, .type = rtype, .scount = scount, .stype = stype}, comm))
    return (kind == alg::Collective::alltoall ? next::Alltoall : next::Allgather)(sbuf, scount, stype, rbuf, rcount,
                                                                                  rtype, comm);
  return exchange_slow<kind>(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}
}  // namespace

// Passed through; counted where a collective's choice depends on whether a
// barrier came before it (algorithms::note_barrier).
extern "C" int MPI_Barrier(MPI_Comm comm) {
  if (alg::barriers_matter()) [[unlikely]] {
    alg::note_barrier(comm);
    if (alg::barriers_timed()) {
      const auto start = std::chrono::steady_clock::now();
      const int rc = next::Barrier(comm);
      alg::note_barrier_seconds(comm, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return rc;
    }
  }
  return next::Barrier(comm);
}

extern "C" int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (surely_library({.collective = alg::Collective::allreduce, .sbuf = sbuf, .count = count, .type = type, .op = op},
                     comm))
    return next::Allreduce(sbuf, rbuf, count, type, op, comm);
  return allreduce_slow(sbuf, rbuf, count, type, op, comm);
}

extern "C" int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (surely_library({.collective = alg::Collective::bcast, .count = count, .type = type, .root = root}, comm))
    return next::Bcast(buf, count, type, root, comm);
  return bcast_slow(buf, count, type, root, comm);
}

extern "C" int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm) {
  if (surely_library(
          {.collective = alg::Collective::reduce, .sbuf = sbuf, .count = count, .type = type, .op = op, .root = root},
          comm))
    return next::Reduce(sbuf, rbuf, count, type, op, root, comm);
  return reduce_slow(sbuf, rbuf, count, type, op, root, comm);
}

extern "C" int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                             MPI_Datatype rtype, MPI_Comm comm) {
  return exchange<alg::Collective::allgather>(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

extern "C" int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm) {
  // Remembered by the total of its counts: the quick path sums them over the
  // communicator's noted size and looks the total up (deciding every call
  // afresh cost 50 ns over the library at 1 rank, Open MPI; asking the
  // library for the size, 4 ns more).
  if (int p = 0, unused = 0; rcounts && noted(comm, CommFact::size, p, unused)) [[likely]] {
    if (const std::optional<int> total = alg::counts_total(rcounts, p);
        total &&
        surely_library(
            {.collective = alg::Collective::reduce_scatter, .sbuf = sbuf, .count = *total, .type = type, .op = op},
            comm))
      return next::Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
  }
  return reduce_scatter_slow(sbuf, rbuf, rcounts, type, op, comm, alg::scatter_total(rcounts, comm));
}

extern "C" int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm) {
  if (surely_library(
          {.collective = alg::Collective::reduce_scatter_block, .sbuf = sbuf, .count = rcount, .type = type, .op = op},
          comm))
    return next::Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm);
  return reduce_scatter_block_slow(sbuf, rbuf, rcount, type, op, comm);
}

extern "C" int MPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm) {
  return exchange<alg::Collective::alltoall>(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}
