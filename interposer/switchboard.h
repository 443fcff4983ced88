// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The take-over rules of the interposer, in one place.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>

#include "datatypes/cache.h"
#include "kernels/device_runtime.h"
#include "support/address.h"
#include "support/config.h"
#include "support/counters.h"
#include "topology/peer_level.h"

namespace veneer {

// The switches (support/config.h, the README's VENEER_ table), one predicate
// per call family. Entry points ask only these for the switch part of their
// decision. Always inlined and reading only the fields named, so a predicate
// costs what testing the fields by hand did (the pass-through fast paths
// below and in pack.cpp and collectives.cpp are measured to a few instructions).

// MPI_Pack/MPI_Unpack and their _c forms, host and device buffers alike:
// honours VENEER_DISABLE, VENEER_DATATYPES, VENEER_PACK.
[[gnu::always_inline]] inline bool takes_pack(const Config& c) { return c.enabled && c.datatypes && c.pack; }
// Sends and receives: honours VENEER_DISABLE, VENEER_P2P. Host data is
// packed only when uses_packers() also holds, device data carried only when
// carries_device() does.
[[gnu::always_inline]] inline bool takes_send(const Config& c) { return c.enabled && c.p2p; }
// Alltoallv/w and their neighbourhood forms: honours VENEER_DISABLE,
// VENEER_ALLTOALLV; host data as for sends (uses_packers), device data
// likewise (carries_device).
[[gnu::always_inline]] inline bool takes_alltoallv(const Config& c) { return c.enabled && c.alltoall; }
// Every other collective (their algorithms, and device buffers staged through
// host memory): honours VENEER_DISABLE, VENEER_COLLECTIVES; the staging also
// carries_device(). VENEER_DATATYPES does not apply (they use no packer of Veneer's).
[[gnu::always_inline]] inline bool takes_collective(const Config& c) { return c.enabled && c.collectives; }
// Whether Veneer's packers (the datatype engine: host layouts, device
// packers) may run for a send, receive or Alltoallv/w: honours
// VENEER_DATATYPES. Asked after the family's predicate, which holds VENEER_DISABLE.
[[gnu::always_inline]] inline bool uses_packers(const Config& c) { return c.datatypes; }
// Device buffers (any family, after its own predicate): honours
// VENEER_DISABLE, VENEER_DEVICE.
[[gnu::always_inline]] inline bool carries_device(const Config& c) { return c.enabled && c.device; }
// A device buffer of a type that is (not) contiguous: also honours
// VENEER_DATATYPES. With it off, only contiguous device data is carried
// (copied through pinned host memory for a library that is not CUDA-aware,
// a copy and not the datatype engine); other device data passes through.
[[gnu::always_inline]] inline bool carries_device(const Config& c, bool contiguous) {
  return carries_device(c) && (contiguous || uses_packers(c));
}

// `base` + `offset` bytes, in integers (support/address.h: MPI_BOTTOM with absolute displacements).
inline void* offset_ptr(const void* base, int64_t offset) { return const_cast<void*>(address::at(base, offset)); }

// True if the CPU may touch the buffer (host or managed memory). Device
// memory (a CUDA-aware MPI's business) passes through untouched. `first` is
// the address of the first byte the operation touches.
inline bool cpu_accessible(const void* first) {
  const auto kind = kernels::buffer_kind(first);
  return kind == kernels::MemoryKind::host || kind == kernels::MemoryKind::managed;
}
inline bool cpu_accessible(const void* a, const void* b) {
  if (!kernels::device_memory_possible()) return true;  // no driver: no device memory anywhere
  return cpu_accessible(a) && cpu_accessible(b);
}

// MPI_Pack/MPI_Unpack's take-over rule (the int forms in interposer/pack.cpp
// and the MPI-4 _c forms in interposer/large_count.cpp): the layout to pack
// `count` instances of `type` with at byte `position` of a packed buffer of
// `size` bytes, or null to pass the call to the library, which reports its
// own errors. Zero bytes (count 0 or a zero-size type) are a valid no-op that
// Veneer answers itself: MPICH 4.0's own MPI_Unpack divides by zero on them.
// A borrowed pointer (datatypes::peek): valid for this call, which looks up no
// other type.
inline const datatypes::Layout* pack_layout(int64_t count, MPI_Datatype type, int64_t size, int64_t position,
                                            MPI_Comm comm) {
  const Config& c = config();
  if (!takes_pack(c) || count < 0 || size < 0 || position < 0 || comm == MPI_COMM_NULL) return nullptr;
  const datatypes::Layout* layout = datatypes::peek(type);
  if (!layout || layout->size < 0) return nullptr;
  int64_t bytes = 0, end = 0;
  if (__builtin_mul_overflow(layout->size, count, &bytes) || __builtin_add_overflow(position, bytes, &end) ||
      end > size)
    return nullptr;
  // Several runs of large blocks: the library where the profile measured no gain.
  if (!layout->one_run(count) && layout->mean_block() > c.pack_max_block) return nullptr;
  return layout;
}

// Whether a buffer of this call may be device memory Veneer would carry, as
// the collectives' quick path asks it (interposer/collectives.cpp
// quick_path_open): the device switch on and the process's device byte
// down. The byte alone, as a passed send asks it through its type's rule:
// no countdown to a periodic recheck (a read-modify-write of a TLS counter
// on every call, a third of that path's cost). A dlopen lowers the byte
// (interposer/loader.cpp); the full paths keep the recheck for objects
// loaded behind dlopen's back. Asked where Veneer is on (c.enabled).
[[gnu::always_inline]] inline bool device_byte_down(const Config& c) {
  return c.device && kernels::detail::g_quiet.load(std::memory_order_acquire) == 0;
}

// The device byte (kernels/memory_kind.h g_quiet) is down at start-up and
// after every dlopen until someone asks whether device memory is possible;
// while it is down, every type's send rule says "ask in full". Calls that
// never ask (no partner, nothing to move) ask here, once: the answer raises
// the byte when no device memory can be here, and the epoch moves on, so the
// rules are worked out again with it. Also asked at MPI_Init (device::start).
inline void settle_device_byte(const Config& c) {
  if (carries_device(c) && kernels::detail::g_quiet.load(std::memory_order_relaxed) == 0) [[unlikely]]
    (void)kernels::device_memory_possible();
}

// The pass-through's rule for a type, worked out once per type, thread and
// epoch when the type cache's front entry is filled (datatypes::set_pass_rule;
// interposer/p2p.cpp registers it): the switches, the device state and the
// smallest message taken over (a contiguous type, one Veneer does not
// describe, nothing to move or a mean block above VENEER_P2P_MAX_BLOCK always
// passes; see p2p_layout). Every change of the device byte bumps the epoch
// (kernels/memory_kind.h); objects loaded behind dlopen's back are found by
// the periodic check of the other paths (a taken send, a collective, a pack)
// and by the next epoch: until then a call passed under this rule goes to
// the library as it would without Veneer.
void fill_pass_rule(const datatypes::Layout* layout, datatypes::detail::Front& entry);

// The count below which every send and receive of host data of a type
// `layout` describes (null: one Veneer does not) goes to the library, for
// that kind of call (`nonblocking`: Isend, Irecv and their kin), without
// device memory: datatypes::detail::kAlwaysPasses when it does whatever its
// count (a contiguous type, one Veneer does not describe, a mean block
// above VENEER_P2P_MAX_BLOCK or the nonblocking bound, sends switched off),
// else the count that makes the smallest message taken over. The host case
// of fill_pass_rule, and the type cache's settle rule (datatypes/cache.h
// every_type_passes).
int32_t type_passes_below(const datatypes::Layout* layout, bool nonblocking);
// The same for a type not decoded yet whose elements are `size` bytes: the
// count that makes the smallest message taken over, whatever its layout
// (the type cache's rule for a type between its commit and its first use).
int32_t size_passes_below(int64_t size, bool nonblocking);

// The first question of MPI_Send, Isend, Recv and Irecv (interposer/p2p.cpp
// quick): `count` elements of any committed type would pass
// (every_type_passes: below the least count at which a live type may be
// taken over) and no device memory can be here (or Veneer carries none), so
// the call goes to the library without a lookup of its type. In a halo
// exchange whose types all pass, the lookup of each call's type cost 1-2% of
// the exchange at 1 rank (Open MPI; docs/results.md). False: ask by the
// type (p2p_plainly_passes).
[[gnu::always_inline]] inline bool p2p_leanly_passes(int count, bool nonblocking) {
  const Config& c = config();
  return datatypes::every_type_passes(count, nonblocking) && !(carries_device(c) && device_byte_down(c));
}

// The common case of the pass-through alone, for the entry points of
// MPI_Send, Isend, Recv and Irecv (interposer/p2p.cpp quick): a type this
// thread has seen in this epoch, a count below its entry's threshold, and
// no report to count it for. A few loads and compares with no taken branch;
// the only stores are to the front's own first line (front_entry_ahead: a
// store to each entry's line on every call cost a halo exchange's 52 passed
// calls 0.5%). False: ask p2p_passes.
[[gnu::always_inline]] inline bool p2p_plainly_passes(int count, MPI_Datatype type, bool nonblocking) {
  const datatypes::detail::Front* seen = datatypes::front_entry_ahead(datatypes::detail::t_front, type);
  return seen && count < seen->pass_below[nonblocking ? 1 : 0] && !seen->noted;
}

// The quick answer every send and receive asks first: true when the call
// certainly goes to the library untouched (and it is counted as `passed`);
// false sends it through the full rules below.
// `nonblocking`: Isend, Irecv and their kin (Config::p2p_nonblocking_min_bytes).
[[gnu::always_inline]] inline bool p2p_passes(int count, MPI_Datatype type, int peer, bool nonblocking,
                                              Counter passed) {
  const datatypes::detail::Front* seen = datatypes::front_entry(datatypes::detail::t_front, type);
  // The rule of the type's entry; else no partner (the boundary of a
  // non-periodic halo exchange, of any type and size) or nothing to move.
  if (seen && count < seen->pass_below[nonblocking ? 1 : 0]) {
    counters().add(passed);
    return true;
  }
  if (peer == MPI_PROC_NULL || count <= 0) {
    settle_device_byte(config());
    // Into this thread's front, so that the next such call of a type that
    // always passes (a contiguous one) is a plain pass.
    if (!seen) (void)datatypes::peek(type);
    counters().add(passed);
    return true;
  }
  return false;
}

// The layout to pack `count` instances of `type` with for a send or receive
// with `peer` of `comm`, or null to pass the call through. The rule: the data
// is not contiguous, the message fits VENEER_P2P_MAX_BYTES and an int byte
// count, and either
//  - with a calibrated profile's send tables (Config::send_rules): the table
//    of the peer's level (same node, other node; topology/peer_level.h) says
//    Veneer's way was measured faster beyond the spread around this mean
//    block and message size (support/send_rule.h), and a `nonblocking` one
//    (Isend, Irecv and their kin) is at least the built-in smallest message
//    and at most the built-in largest mean block
//    (Config::p2p_nonblocking_min_bytes, p2p_nonblocking_max_block): the
//    tables time one blocking message at a time, while nonblocking calls come
//    many at once and each taken over holds its staging until completion
//    (halo3d's 26-neighbour exchange with 4.6 KB faces taken over by such a
//    table ran at 0.69-0.83x of the library, passed through at 0.98-0.99x;
//    with 24-byte cells, 0.62-0.94x); or
//  - without: its mean contiguous block is at most VENEER_P2P_MAX_BLOCK bytes
//    (the library's own copy loop is competitive for large blocks and avoids
//    our extra copy) and the message is at least VENEER_P2P_MIN_BYTES; and,
//    with both bounds built in, the job runs on one host
//    (Config::p2p_one_host_only: the bounds were measured on one).
// (With tables, those two hold the tables' loosest bounds, so the checks
// below and p2p_passes never refuse what a table would take.)
inline std::shared_ptr<const datatypes::Layout> p2p_layout(const void* buf, int count, MPI_Datatype type, int peer,
                                                           MPI_Comm comm, bool nonblocking = false) {
  const Config& c = config();
  // Looked up first whatever the switches say: the lookup enters the type in
  // this thread's front, whose rule then passes the next call of it on the
  // quick path. (Asked only after the switches, a halo exchange's calls
  // under VENEER_DISABLE=1 each went the full way: 0.84-0.89 of the
  // library at 1 rank, against 0.93-0.99 with Veneer on.)
  const datatypes::Layout* seen = datatypes::peek(type);  // no reference count for the common pass-through
  if (!takes_send(c) || !uses_packers(c) || count <= 0 || peer == MPI_PROC_NULL) return nullptr;
  if (!seen || seen->contiguous || seen->size <= 0) return nullptr;
  auto layout = datatypes::lookup(type);
  if (!layout) return nullptr;
  const int64_t bytes = layout->size * count;
  if (bytes < (nonblocking ? c.p2p_nonblocking_min_bytes : c.p2p_min_bytes) || bytes > c.p2p_max_bytes ||
      bytes > INT_MAX || layout->mean_block() > (nonblocking ? c.p2p_nonblocking_max_block : c.p2p_max_block))
    return nullptr;
  if (c.send_rules) {
    const double mean_block =
        static_cast<double>(layout->size) / static_cast<double>(std::max<int64_t>(1, layout->block_count));
    if (!c.send_rules->takes(topology::peer_level(comm, peer), mean_block, bytes)) return nullptr;
  } else if (c.p2p_one_host_only && topology::world_host_count() > 1) {
    return nullptr;
  }
  if (!cpu_accessible(offset_ptr(buf, layout->true_lb))) return nullptr;
  return layout;
}

// Alltoallv/w and their neighbourhood forms, one peer's block of host data
// (after takes_alltoallv and uses_packers; interposer/alltoall.cpp): whether
// Veneer packs `count` instances of `layout` itself rather than handing the
// library the type. The send rule, per block: several contiguous runs whose
// mean is at most VENEER_ALLTOALL_MAX_BLOCK bytes, and in all at least
// VENEER_ALLTOALL_MIN_BYTES, at most VENEER_P2P_MAX_BYTES and an int.
[[gnu::always_inline]] inline bool alltoall_block_packs(const Config& c, const datatypes::Layout* layout, int count) {
  if (!layout || count <= 0 || layout->size <= 0 || layout->one_run(count) ||
      layout->mean_block() > c.alltoall_max_block)
    return false;
  int64_t bytes = 0;
  return !__builtin_mul_overflow(layout->size, int64_t{count}, &bytes) && bytes >= c.alltoall_min_bytes &&
         bytes <= c.p2p_max_bytes && bytes <= INT_MAX;
}

}  // namespace veneer
