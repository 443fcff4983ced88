// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The selector's decisions, remembered per thread, so a collective Veneer has
// decided about once (pass through, or which algorithm) costs a table lookup
// on every later call with the same arguments instead of a new decision.
//
// A decision is a pure function of its key (the arguments MPI requires to be
// identical on every rank) and of state that only changes through
// forget_decisions(): the rules, the model, the communicator's hierarchy.
// Handles can be reused once freed, so only keys whose handles cannot change
// meaning unnoticed are remembered: predefined types and ops, and
// communicators Veneer watches (an attribute whose delete callback forgets
// every decision when the communicator is freed). Ranks therefore agree
// whether or not a decision came from the cache.
#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"
#include "support/handle.h"

namespace veneer::algorithms {

struct DecisionKey {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Datatype stype = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  int count = 0;
  int scount = 0;
  int root = 0;
  Collective collective = Collective::allreduce;
  bool in_place = false;
  bool operator==(const DecisionKey&) const = default;
};

struct Remembered {
  const Algorithm* algorithm = nullptr;            // nullptr: the library
  const topology::Hierarchy* hierarchy = nullptr;  // where algorithm runs (valid while comm lives)
  // Bcast and reduce: the choice when the root differs from the previous such
  // call's on the communicator (Shape::moving_root). `root_seen` is set (the
  // hierarchy's last_root of this collective) only where the two choices
  // differ; otherwise `moving` equals `algorithm`.
  const Algorithm* moving = nullptr;
  std::atomic<int>* root_seen = nullptr;
  // The choice for the first such call since an MPI_Barrier on the
  // communicator (Shape::after_barrier). `barrier_seen` (the hierarchy's
  // barriers_seen of this collective) and `barriers` (its barrier count) are
  // set only where it differs from `algorithm`. A moved root takes precedence.
  const Algorithm* after_barrier = nullptr;
  std::atomic<uint64_t>* barrier_seen = nullptr;
  const std::atomic<uint64_t>* barriers = nullptr;

  // The choice for a call with `root`, without noting anything. Where it is
  // the library, nothing would be noted either.
  [[gnu::always_inline]] const Algorithm* choice(int root) const {
    if (root_seen && root_seen->load(std::memory_order_relaxed) != root) return moving;
    if (barrier_seen && barrier_seen->load(std::memory_order_relaxed) != barriers->load(std::memory_order_relaxed))
      return after_barrier;
    return algorithm;
  }
  // The choice for a call with `root`, noting the root and the barriers for the next call.
  [[gnu::always_inline]] const Algorithm* for_root(int root) const {
    const Algorithm* a = choice(root);
    if (root_seen) root_seen->store(root, std::memory_order_relaxed);
    if (barrier_seen) barrier_seen->store(barriers->load(std::memory_order_relaxed), std::memory_order_relaxed);
    return a;
  }
};

namespace detail {
struct Slot {
  DecisionKey key;
  Remembered decision;
  uint64_t epoch = 0;  // 0: empty
};
// Two ways per set, the most recent fill first: a call pattern that cycles
// through a few shapes (a broadcast whose root rotates over the ranks, an
// allreduce in place and out of place) keeps every shape, where one way per
// slot let two shapes of one slot evict each other on every call.
inline constexpr size_t kSetBits = 7;
inline constexpr size_t kSets = size_t{1} << kSetBits;  // 256 shapes in all
struct Set {
  std::array<Slot, 2> ways;
};
struct Table {
  std::array<Set, kSets> sets;
};
// The table lives on the heap; the thread reaches it through one pointer in
// static TLS (initial-exec: no call into the loader on every lookup).
extern thread_local constinit Table* t_table [[gnu::tls_model("initial-exec")]];
extern std::atomic<uint64_t> g_epoch;  // bumped whenever every remembered decision becomes stale
// Every field that tells calls apart moves the set: the root and the
// collective too (they once sat in bits the index never read, so every root
// of a broadcast shared one slot). Independent multiplies, then the top bits.
[[gnu::always_inline]] inline size_t set_of(const DecisionKey& k) {
  uint64_t h = handle_key(k.comm) * 0x9E3779B97F4A7C15ull;
  h ^= handle_key(k.type) * 0xC2B2AE3D27D4EB4Full;
  h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.count)) << 32 | static_cast<uint32_t>(k.root)) *
       0x165667B19E3779F9ull;
  h ^= (handle_key(k.op) ^ static_cast<uint64_t>(k.collective) << 1 ^ static_cast<uint64_t>(k.in_place)) *
       0x27D4EB2F165667C5ull;
  h ^= h >> 29;
  return static_cast<size_t>((h * 0x9E3779B97F4A7C15ull) >> (64 - kSetBits));
}
}  // namespace detail

// This thread's remembered decision for `key`, or nullptr.
[[gnu::always_inline]] inline const Remembered* recall_decision(const DecisionKey& key) {
  detail::Table* t = detail::t_table;
  if (!t) return nullptr;
  const detail::Set& set = t->sets[detail::set_of(key)];
  const uint64_t epoch = detail::g_epoch.load(std::memory_order_acquire);
  if (set.ways[0].epoch == epoch && set.ways[0].key == key) [[likely]]
    return &set.ways[0].decision;
  if (set.ways[1].epoch == epoch && set.ways[1].key == key) return &set.ways[1].decision;
  return nullptr;
}
// Remembers `d` for `key` on this thread (call only for keys that may be remembered: see above).
void remember_decision(const DecisionKey& key, const Remembered& d);
// Forgets every decision of every thread (rules, model or profile changed).
void forget_decisions();
// Makes sure every decision is forgotten when `comm` is freed. False if that
// cannot be arranged: decisions about comm must then not be remembered.
bool watch_communicator(MPI_Comm comm);
// Frees the keyval (at MPI_Finalize); decisions are forgotten.
void decisions_finalize();

}  // namespace veneer::algorithms
