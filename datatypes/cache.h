// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The per-type layout cache. Built lazily on first use; an entry leaves when
// its type is freed (a type attribute with a delete callback), so handle reuse
// is safe. Only types known to be committed are described: predefined types,
// and derived types seen by MPI_Type_commit (note_committed). Anything else
// returns null and the caller passes through to the library.
#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "datatypes/layout.h"
#include "support/config.h"
#include "support/handle.h"

namespace veneer::datatypes {

// Call once after MPI_Init (creates the type keyval).
void cache_init();
// Call at MPI_Finalize (frees the keyval, drops every entry).
void cache_finalize();
// Record that `type` was just committed successfully.
void note_committed(MPI_Datatype type);
// The layout of `type`, or null if Veneer cannot or must not describe it.
std::shared_ptr<const Layout> lookup(MPI_Datatype type);

namespace detail {
// A per-thread front of the cache, valid while the epoch (g_cache_epoch,
// support/config.h) is unchanged: two-way set associative, big enough for an
// application's working set of types (a halo code with a type per face and
// field holds hundreds) so that lookups stay off the shared table.
// Heap-allocated on a thread's first fill and reached through one pointer in
// static TLS (no call into the loader per lookup); until then the pointer
// names an empty table that never matches, so a lookup asks no null pointer.
// Both entries of a set share one cache line and hold what the pass-through
// asks of a type (interposer/switchboard.h p2p_passes), so that a hit
// touches that line alone; the layouts sit in an array beside them.
inline constexpr int32_t kAlwaysPasses = std::numeric_limits<int32_t>::max();
struct Front {
  uint64_t key = 0;
  uint64_t epoch = 0;  // 0: never valid (the epoch starts at 1)
  // The pass-through's rule for this type, worked out when the entry was
  // filled by the rule the interposer set (set_pass_rule) under the
  // configuration and device state of this epoch: a send or receive of fewer
  // than pass_below[nonblocking] elements certainly goes to the library
  // (kAlwaysPasses: any count; 0: none is known to without the full rules).
  int32_t pass_below[2] = {0, 0};
  // Passes are counted (the end-of-run report is on): the caller takes its
  // out-of-line path for each.
  uint8_t noted = 0;
  // The slot asked after this entry the last time it was asked through
  // front_entry_ahead: where the next call of a repeated sequence of types
  // will look, fetched ahead. A hint only (the slot may since hold another
  // type, or none); written only when the sequence changes.
  mutable uint16_t next = 0;
};
static_assert(sizeof(Front) == 32, "two entries per cache line");
inline constexpr size_t kFrontSets = 2048;
struct FrontTable {
  // The slot front_entry_ahead found last, and that entry's `next` then.
  alignas(64) uint16_t last = 0;
  uint16_t last_next = 0;
  alignas(64) std::array<Front, 2 * kFrontSets> slots;                // set s: slots 2s and 2s+1
  std::array<std::shared_ptr<const Layout>, 2 * kFrontSets> layouts;  // of each slot (null: no layout)
  size_t sweep = 0;  // where the next fill starts releasing stale entries
};
extern thread_local constinit FrontTable* t_front [[gnu::tls_model("initial-exec")]];
// The first slot of key's set. Nearby handles go to nearby sets, so that a
// working set of types made one after another spans few pages: Open MPI's
// handles are the addresses of its type objects (several hundred bytes each),
// MPICH's are indices with the kind in the high bits.
inline size_t set_of(uint64_t key) {
#ifdef OPEN_MPI
  return 2 * ((key >> 9) & (kFrontSets - 1));
#else
  return 2 * ((key ^ key >> 12) & (kFrontSets - 1));
#endif
}
// This thread's valid front entry for key, or null.
// The first way holds its set's most recent fill (front_fill), so when its
// key matches, an entry for the same key in the second way is older still:
// only the first is asked. The common case, a hit in the first way, is the
// straight path.
[[gnu::always_inline]] inline const Front* front_hit(uint64_t key, uint64_t epoch) {
  FrontTable* t = t_front;
  const size_t i = set_of(key);
  const Front* f = &t->slots[i];
  if (f->key != key) [[unlikely]] {
    f = &t->slots[i + 1];
    if (f->key != key) return nullptr;
  }
  return f->epoch == epoch ? f : nullptr;
}
// The layout of a valid entry of this thread's front.
[[gnu::always_inline]] inline const std::shared_ptr<const Layout>& layout_of(const Front* f) {
  FrontTable* t = t_front;
  return t->layouts[static_cast<size_t>(f - t->slots.data())];
}
const Layout* peek_slow(MPI_Datatype type);
}  // namespace detail

// Works out a front entry's pass-through rule (pass_below, noted) for
// `layout` (null: a type Veneer does not describe) when the entry is filled.
// Set once by the interposer before MPI traffic; without one, nothing is
// known to pass (pass_below 0).
using PassRule = void (*)(const Layout* layout, detail::Front& entry);
void set_pass_rule(PassRule rule);

// Whether a send or receive of host data of one kind with `count` elements
// goes to the library whatever its type, by the rule set_settle_rule gives
// under the configuration of now: then it needs no lookup of its type (the
// interposer's p2p quick path; device memory is its own question). True
// when every committed derived type passes at that count: the count is
// below the least `below` of the types that do not pass at every count
// (the largest int while there are none), and passes are not counted one by
// one. Predefined types are not counted: their sends and receives pass
// while this holds. A type is counted from its commit, by its size until
// it is decoded (at its first use) and by its layout after, and forgotten
// when freed; a change of the configuration has every type counted again
// at the cache's next miss or commit.
// `nonblocking`: Isend, Irecv and their kin, which have rules of their own.
[[gnu::always_inline]] inline bool every_type_passes(int count, bool nonblocking) {
  return count < g_lean_below[nonblocking ? 1 : 0].load(std::memory_order_relaxed);
}
// The rule of every_type_passes: `passes_below(layout, nonblocking)` (layout
// null: a type Veneer does not describe) is the count below which every
// such send and receive of host data of that type goes to the library
// (detail::kAlwaysPasses: every count); `open()` is false while passes must
// be seen one by one (the report counts them). Set once by the interposer
// before MPI traffic; without it every derived type counts at 0.
// `size_below(size, nonblocking)` is the same for a type not yet decoded
// whose elements are `size` bytes (a derived type is decoded at its first
// use, not at its commit): a count below which any layout of that size
// passes.
using PassesBelowRule = int32_t (*)(const Layout* layout, bool nonblocking);
using SizeBelowRule = int32_t (*)(int64_t size, bool nonblocking);
void set_settle_rule(PassesBelowRule passes_below, SizeBelowRule size_below, bool (*open)());

// This thread's front entry for `type` alone, for the quickest checks, or
// null when the front does not know the type (ask peek(), which fills it;
// MPI_DATATYPE_NULL is never in the front).
// The epoch is read relaxed: a hit reads only this thread's own entry, so
// the load may be scheduled where it costs least (an entry of the previous
// epoch read meanwhile is what a call made a moment earlier would have used).
namespace detail {
// The slot of t's valid entry for key (either way of its set), or -1.
[[gnu::always_inline]] inline int front_slot(const FrontTable* t, uint64_t key) {
  auto slot = static_cast<int>(set_of(key));
  if (t->slots[slot].key != key) [[unlikely]] {
    ++slot;
    if (t->slots[slot].key != key) return -1;
  }
  return t->slots[slot].epoch == g_cache_epoch.load(std::memory_order_relaxed) ? slot : -1;
}
}  // namespace detail
[[gnu::always_inline]] inline const detail::Front* front_entry(detail::FrontTable* t, MPI_Datatype type) {
  const int slot = detail::front_slot(t, handle_key(type));
  return slot < 0 ? nullptr : &t->slots[slot];
}

// front_entry for the pass-through of sends and receives, which come in
// repeated sequences of types: a halo exchange posts a receive and a send per
// neighbour, 52 types in a 26-neighbour exchange, every iteration in the same
// order. Between two such calls the library moves their data, which pushes
// this front's lines out of the first-level cache, and a lookup that misses
// there cost the exchange 2-4% of its time (1 rank, Open MPI). So each entry
// learns the slot asked after it, and a hit fetches that slot ahead: the next
// call of the sequence finds its line already on its way. Steady state: two
// stores to the table's own first line and a prefetch; the hint is written
// only when the sequence changes. Null as front_entry (the empty table before
// a thread's first fill never matches, so it is never written).
[[gnu::always_inline]] inline const detail::Front* front_entry_ahead(detail::FrontTable* t, MPI_Datatype type) {
  const int found = detail::front_slot(t, handle_key(type));
  if (found < 0) return nullptr;
  const auto slot = static_cast<uint16_t>(found);
  const detail::Front& f = t->slots[slot];
  if (t->last_next != slot) [[unlikely]]
    t->slots[t->last].next = slot;
  const uint16_t next = f.next;
  t->last = slot;
  t->last_next = next;
  __builtin_prefetch(&t->slots[next]);
  return &f;
}

// This thread's front alone, for the quickest checks: true with *layout set
// (null: a type Veneer does not describe) when the front knows the type;
// false when it does not (ask peek(), which fills it).
[[gnu::always_inline]] inline bool peek_front(MPI_Datatype type, const Layout** layout) {
  if (type == MPI_DATATYPE_NULL) {
    *layout = nullptr;
    return true;
  }
  const detail::Front* f = detail::front_hit(handle_key(type), g_cache_epoch.load(std::memory_order_acquire));
  if (!f) return false;
  *layout = detail::layout_of(f).get();
  return true;
}

// The same, without taking a reference: the pointer is valid until the type
// is freed or this thread looks up another type. For quick checks on the
// pass-through path: a hit in this thread's front is a few loads.
[[gnu::always_inline]] inline const Layout* peek(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  if (const detail::Front* f = detail::front_hit(handle_key(type), g_cache_epoch.load(std::memory_order_acquire)))
    return detail::layout_of(f).get();
  return detail::peek_slow(type);
}

// Called (outside the cache's lock) with the layout of every type freed
// while decoded, so that what others keep per layout (device packers) can go
// with it. One hook; null removes it.
using FreedLayoutHook = void (*)(const Layout* layout);
void set_freed_layout_hook(FreedLayoutHook hook);

// Called after every freed type whose commit Veneer saw (watched()), decoded
// or not: its handle may now name another type, so whatever was remembered
// by handle (the collectives' decisions) must go. One hook; null removes it.
using FreedTypeHook = void (*)();
void set_freed_type_hook(FreedTypeHook hook);
// Whether freeing `type` will call that hook: a derived type whose commit
// was seen. (Predefined types are never freed.)
bool watched(MPI_Datatype type);

struct CacheStats {
  int64_t entries = 0, hits = 0, misses = 0, decoded = 0, unsupported = 0, evicted = 0;
};
CacheStats cache_stats();

}  // namespace veneer::datatypes
