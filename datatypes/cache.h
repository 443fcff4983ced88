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
#include <memory>

#include "datatypes/layout.h"
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
// A per-thread front of the cache, valid while the epoch is unchanged: two-way
// set associative, big enough for an application's working set of types (a
// halo code with a type per face and field holds hundreds) so that lookups
// stay off the shared table. Heap-allocated on a thread's first lookup and
// reached through one pointer in static TLS (no call into the loader per lookup).
// One entry per cache line, holding copies of the layout's facts the
// pass-through checks read (switchboard.h p2p_passes), so that a hit touches
// this line and not the layout's.
struct alignas(64) Front {
  uint64_t key = 0;
  uint64_t epoch = 0;
  std::shared_ptr<const Layout> layout;
  int64_t size = 0;        // layout->size
  int64_t mean_block = 0;  // layout->mean_block()
  // No layout, a contiguous one or nothing to move: a send passes whatever its count.
  bool plain = true;
};
inline const Front kNoType{};  // MPI_DATATYPE_NULL: known, with no layout (plain)
inline constexpr size_t kFrontSets = 2048;
struct FrontTable {
  std::array<Front, 2 * kFrontSets> slots;
  size_t sweep = 0;  // where the next fill starts releasing stale entries
};
extern thread_local constinit FrontTable* t_front [[gnu::tls_model("initial-exec")]];
extern std::atomic<uint64_t> g_epoch;  // bumped whenever an entry leaves the cache
inline size_t set_of(uint64_t key) { return 2 * ((key >> 4 ^ key >> 13 ^ key) & (kFrontSets - 1)); }
// This thread's valid front entry for key, or null.
[[gnu::always_inline]] inline const Front* front_hit(uint64_t key, uint64_t epoch) {
  FrontTable* t = t_front;
  if (!t) return nullptr;
  const size_t i = set_of(key);
  if (t->slots[i].key == key && t->slots[i].epoch == epoch) return &t->slots[i];
  if (t->slots[i + 1].key == key && t->slots[i + 1].epoch == epoch) return &t->slots[i + 1];
  return nullptr;
}
const Layout* peek_slow(MPI_Datatype type);
}  // namespace detail

// This thread's front entry for `type` alone, for the quickest checks (its
// layout null: a type Veneer does not describe), or null when the front does
// not know the type (ask peek(), which fills it).
[[gnu::always_inline]] inline const detail::Front* front_entry(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return &detail::kNoType;
  return detail::front_hit(handle_key(type), detail::g_epoch.load(std::memory_order_acquire));
}

// This thread's front alone, for the quickest checks: true with *layout set
// (null: a type Veneer does not describe) when the front knows the type;
// false when it does not (ask peek(), which fills it).
[[gnu::always_inline]] inline bool peek_front(MPI_Datatype type, const Layout** layout) {
  if (type == MPI_DATATYPE_NULL) {
    *layout = nullptr;
    return true;
  }
  const detail::Front* f = detail::front_hit(handle_key(type), detail::g_epoch.load(std::memory_order_acquire));
  if (!f) return false;
  *layout = f->layout.get();
  return true;
}

// The same, without taking a reference: the pointer is valid until the type
// is freed or this thread looks up another type. For quick checks on the
// pass-through path: a hit in this thread's front is a few loads.
[[gnu::always_inline]] inline const Layout* peek(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  if (const detail::Front* f = detail::front_hit(handle_key(type), detail::g_epoch.load(std::memory_order_acquire)))
    return f->layout.get();
  return detail::peek_slow(type);
}

// Called (outside the cache's lock) with the layout of every type freed
// while decoded, so that what others keep per layout (device packers) can go
// with it. One hook; null removes it.
using FreedLayoutHook = void (*)(const Layout* layout);
void set_freed_layout_hook(FreedLayoutHook hook);

struct CacheStats {
  int64_t entries = 0, hits = 0, misses = 0, decoded = 0, unsupported = 0, evicted = 0;
};
CacheStats cache_stats();

}  // namespace veneer::datatypes
