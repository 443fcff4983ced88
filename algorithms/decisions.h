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
// the decisions about the communicator when it is freed). Ranks therefore
// agree whether or not a decision came from the cache.
#include <mpi.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"
#include "support/config.h"
#include "support/handle.h"
#include "topology/hierarchy.h"

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
  const topology::Hierarchy* hierarchy = nullptr;  // where algorithms run (valid while comm lives)
  // Where the choice depends on the call's history on the communicator, the
  // alternatives (1 + their index in algorithms_for(collective), 0 the
  // library) and a bit each in `varies`:
  //  - moved_root: a bcast or reduce whose root differs from the previous
  //    such call's (Shape::moving_root; the hierarchy's last_root);
  //  - first_since_barrier: the first such call since an MPI_Barrier on the
  //    communicator (Shape::after_barrier; the hierarchy's barriers and
  //    barriers_seen). A moved root takes precedence.
  // Small, so that a set of two slots stays within three cache lines.
  static constexpr uint8_t moved_root = 1, first_since_barrier = 2;
  uint8_t varies = 0;
  uint8_t moving = 0;
  uint8_t after_barrier = 0;
  // A bit per pattern (1 << condition(): the call's own, root moved, first
  // since a barrier) whose choice the model made and a trial has not yet
  // confirmed (algorithms/trial.h).
  uint8_t on_trial = 0;
  // Of those, a bit per pattern where the algorithm is a challenger: the
  // library was kept on a rank count the profile did not time, and the
  // algorithm takes the pattern only if it leads on the job's own calls.
  // In the high four bits (thin_bit): a bit per pattern where the model's
  // choice is tried for a thin lead on a count the profile timed
  // (TrialRole::thin), or, with the pattern's challenger bit, where the
  // challenger is tried against a thin lead of the library's there
  // (TrialRole::thin_challenger). One byte for both keeps the struct at
  // 32 bytes.
  uint8_t challenged = 0;
  static constexpr uint8_t thin_bit(uint8_t condition) { return static_cast<uint8_t>(16u << condition); }
  // Per pattern, the challengers tried after this one, a queue of two
  // (1 + their index, 0 none; the first in the low four bits, the formulas'
  // best in the high four, Choice::next_challenger and third_challenger).
  // The head is tried where this one does not take the pattern; where it
  // does, only with the pattern's bit in `chained` (for the second,
  // Choice::next_against_first; the formulas' best always). For the
  // model's choice on trial (not a challenger), its fallback alone
  // (Choice::fallback), tried where the choice is returned to the library;
  // or its runner-up (Choice::runner_up, with the bit in `chained`), tried
  // against the library where the choice is returned and against the
  // choice where it is kept.
  std::array<uint8_t, 3> next_challenger{};
  uint8_t chained = 0;
  // Per pattern, what a challenger is tried against: the library (0), or a
  // challenger taken before it (1 + its index), which serves the pattern
  // again where the next one does not lead it.
  std::array<uint8_t, 3> incumbent{};
  Collective collective = Collective::allreduce;

  // Whether a call with `root` goes to the library. Where the choice varies
  // and it does, the root and the barriers are noted as for_root() notes
  // them, so that the next call's pattern is told as the full way would
  // tell it; where it does not, nothing is noted (the full way notes). So a
  // rotating root whose pattern the library serves stays on the quick path
  // while another pattern of the same call is still on trial.
  [[gnu::always_inline]] bool library_for(int root) const {
    if (!varies) [[likely]]
      return !algorithm;
    const bool moved = root_moved(root), came = !moved && barrier_came();
    const bool library = moved ? moving == 0 : came ? after_barrier == 0 : !algorithm;
    if (library && (moved || came)) note(root);  // else nothing changed since the last note
    return library;
  }
  // Which pattern a call with `root` is in: 0 its own, 1 the root moved, 2
  // the first since a barrier (noting nothing).
  uint8_t condition(int root) const {
    if (!varies) return 0;
    if (root_moved(root)) return 1;
    return barrier_came() ? 2 : 0;
  }
  // The trial of pattern `condition` is over: the next challenger in the
  // queue is tried (against what this one was tried against where it was
  // not taken; against this one where it was and the head is `chained`;
  // a head that is not is passed over), or the choice stays (`keep`), or
  // what it was tried against serves the pattern.
  void settle(uint8_t condition, bool keep) {
    const auto bit = static_cast<uint8_t>(1u << condition);
    if (!(challenged & bit) && next_challenger[condition] && (!keep || (chained & bit))) {
      // The model's choice returned: its fallback is tried against the
      // library, as a challenger (to a thin lead, where the choice was
      // tried for one: the thin bit stays). Kept, with its runner-up queued
      // (`chained`: Choice::runner_up, where a large call's choice was
      // tried whatever its lead), the runner-up is tried against it, as the
      // challenger to a thin lead.
      const auto head = static_cast<uint8_t>(next_challenger[condition] & 15u);
      next_challenger[condition] = 0;
      chained = static_cast<uint8_t>(chained & ~bit);
      challenged |= bit;
      if (keep) challenged |= thin_bit(condition);
      incumbent[condition] = keep ? index_of(alternative_for(condition)) : 0;
      set_choice(condition, head);
      return;
    }
    if (challenged & bit) {
      if (keep) incumbent[condition] = index_of(alternative_for(condition));
      while (next_challenger[condition]) {
        const auto head = static_cast<uint8_t>(next_challenger[condition] & 15u);
        const bool against_taken = (chained & bit) != 0;
        next_challenger[condition] = static_cast<uint8_t>(next_challenger[condition] >> 4);
        chained |= bit;  // the one behind: the formulas' best
        if (incumbent[condition] == 0 || against_taken) {
          set_choice(condition, head);
          return;
        }
      }
    }
    on_trial = static_cast<uint8_t>(on_trial & ~bit);
    challenged = static_cast<uint8_t>(challenged & ~bit & ~thin_bit(condition));
    chained = static_cast<uint8_t>(chained & ~bit);
    next_challenger[condition] = 0;
    if (!keep) set_choice(condition, incumbent[condition]);
    incumbent[condition] = 0;
    // Nothing left on trial and the library for every pattern: the call no
    // longer depends on its pattern, and goes the quick way (the root and
    // the barriers unnoted; in OSU's timing loop the noting cost a small
    // broadcast after every barrier 10-20 ns).
    if (!on_trial && !algorithm && !moving && !after_barrier) varies = 0;
  }
  // The choice for pattern `condition` (as condition() numbers them).
  const Algorithm* alternative_for(uint8_t condition) const {
    return condition == 0 ? algorithm : alternative(condition == 1 ? moving : after_barrier);
  }
  // What the choice for pattern `condition` is tried against (nullptr: the library).
  const Algorithm* incumbent_for(uint8_t condition) const { return alternative(incumbent[condition]); }
  // The choice for a call with `root`, noting the root and the barriers for the next call.
  const Algorithm* for_root(int root) const {
    if (!varies) return algorithm;
    const Algorithm* a = root_moved(root) ? alternative(moving)
                         : barrier_came() ? alternative(after_barrier)
                                          : algorithm;
    note(root);
    return a;
  }

 private:
  // Notes the root and the barriers seen, for the next call's pattern.
  [[gnu::always_inline]] void note(int root) const {
    if (varies & moved_root) last_root().store(root, std::memory_order_relaxed);
    if (varies & first_since_barrier)
      barriers_seen().store(hierarchy->barriers.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  std::atomic<int>& last_root() const { return hierarchy->last_root[collective == Collective::bcast ? 0 : 1]; }
  std::atomic<uint64_t>& barriers_seen() const { return hierarchy->barriers_seen[static_cast<size_t>(collective)]; }
  [[gnu::always_inline]] bool root_moved(int root) const {
    return (varies & moved_root) && last_root().load(std::memory_order_relaxed) != root;
  }
  [[gnu::always_inline]] bool barrier_came() const {
    return (varies & first_since_barrier) &&
           barriers_seen().load(std::memory_order_relaxed) != hierarchy->barriers.load(std::memory_order_relaxed);
  }
  const Algorithm* alternative(uint8_t k) const { return k ? algorithms_for(collective)[k - 1u] : nullptr; }
  // 1 + a's index among the collective's algorithms (0: the library).
  uint8_t index_of(const Algorithm* a) const {
    const auto list = algorithms_for(collective);
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i] == a) return static_cast<uint8_t>(i + 1);
    return 0;
  }
  void set_choice(uint8_t condition, uint8_t k) {
    if (condition == 0) algorithm = alternative(k);
    else if (condition == 1) moving = k;
    else after_barrier = k;
  }
};

// Two slots of a set stay within three cache lines (detail::Set).
static_assert(sizeof(Remembered) <= 32);

namespace detail {
// The key as the table holds it: four words and a tag, so that a lookup
// compares five words, and where the entry point's arguments are constants
// (a broadcast has no op) the compiler compares with immediates. Each
// collective keeps the fields it has: an op (reductions) or a send type
// (allgather, alltoall) in `other`, the root or the send count above the
// count in `counts` (so a call without either, an allreduce, packs its
// count as it is); the field it does not have is ignored. The tag holds
// the collective and MPI_IN_PLACE, and in the table also the epoch
// (stamped()) and the quick bit (answer_quickly()).
struct PackedKey {
  uint64_t comm = 0, type = 0, other = 0, counts = 0, tag = 0;
};
inline constexpr uint64_t kQuick = 1;    // tag bit 0: the library serves this call with nothing to note
inline constexpr unsigned kTagBits = 5;  // quick (1 bit), in place (1), collective (3)
static_assert(collective_count <= 8);
[[gnu::always_inline]] inline PackedKey packed(const DecisionKey& k) {
  const bool exchange = k.collective == Collective::allgather || k.collective == Collective::alltoall;
  const uint64_t other = k.collective == Collective::bcast ? 0 : exchange ? handle_key(k.stype) : handle_key(k.op);
  const auto second = static_cast<uint32_t>(exchange ? k.scount : k.root);
  return {.comm = handle_key(k.comm),
          .type = handle_key(k.type),
          .other = other,
          .counts = static_cast<uint64_t>(second) << 32 | static_cast<uint32_t>(k.count),
          .tag = static_cast<uint64_t>(k.collective) << 2 | static_cast<uint64_t>(k.in_place) << 1};
}
// The tag with the epoch above it. Epochs start at 1: an empty slot (all zeros) never matches.
[[gnu::always_inline]] inline uint64_t stamped(uint64_t tag, uint64_t epoch) { return tag | epoch << kTagBits; }
// Whether `held` is `k` (whose tag is stamped and carries kQuick), the
// quick bit of `held` ignored where `any` is kQuick.
[[gnu::always_inline]] inline bool holds(const PackedKey& held, const PackedKey& k, uint64_t any) {
  return held.comm == k.comm && held.type == k.type && held.other == k.other && held.counts == k.counts &&
         (held.tag | any) == k.tag;
}

struct Slot {
  PackedKey key;  // tag stamped with the epoch it was filled in
  Remembered decision;
};
// Two ways per set, the most recent fill first: a call pattern that cycles
// through a few shapes (a broadcast whose root rotates over the ranks, an
// allreduce in place and out of place) keeps every shape, where one way per
// slot let two shapes of one slot evict each other on every call. A set
// starts a cache line, so the first way's key and the decision's first
// fields share that line.
//
// 1,024 shapes in all (96 KiB a thread): a code whose allreduce count
// varies over 400 values (Open MPI, 2 ranks, a 1-3,200-byte allreduce) had
// most of its calls decided again with room for 256, 0.7 us each over a
// 1.1 us call.
inline constexpr size_t kSetBits = 9;
inline constexpr size_t kSets = size_t{1} << kSetBits;
struct alignas(64) Set {
  std::array<Slot, 2> ways;
};
static_assert(offsetof(Slot, decision) + offsetof(Remembered, varies) < 64);
// A slot's communicator folded to 16 bits, so that forgetting one
// communicator's slots (a free) scans 2 KiB of these, not the table.
[[gnu::always_inline]] inline uint16_t comm_print(uint64_t comm) {
  return static_cast<uint16_t>((comm * 0x9E3779B97F4A7C15ull) >> 48);
}
struct Table {
  std::array<Set, kSets> sets;
  std::array<uint16_t, 2 * kSets> prints{};  // comm_print of sets[i / 2].ways[i % 2]
};
// The table lives on the heap; the thread reaches it through one pointer in
// static TLS (initial-exec: no call into the loader on every lookup).
extern thread_local constinit Table* t_table [[gnu::tls_model("initial-exec")]];
// Every field that tells calls apart moves the set: the root and the
// collective too (they once sat in bits the index never read, so every root
// of a broadcast shared one slot).
[[gnu::always_inline]] inline size_t set_of(const PackedKey& k) {
  // The words folded by rotations (the handles' varying bits apart from
  // the count's), then one multiply and its top bits, which every input bit
  // reaches. Both halves of the multiplier are the golden ratio's fraction,
  // so consecutive values in either half of a word (the tag's and the
  // count's low bits, the root's in the high half) go to well-spread sets:
  // up to 64 roots of one broadcast, and a collective in place and out of
  // place, land in distinct sets whatever the handles. (With the usual
  // 64-bit constant, whose low half is near 1/2, 16 rotating roots shared
  // as few as 11 sets, depending on the handles.) One multiply, not one
  // per field: this runs for every collective left to the library.
  const uint64_t h = k.comm ^ std::rotl(k.type, 21) ^ std::rotl(k.other, 42) ^ k.counts ^ k.tag;
  return static_cast<size_t>((h * 0x9E3779B99E3779B9ull) >> (64 - kSetBits));
}
inline size_t set_of(const DecisionKey& k) { return set_of(packed(k)); }
// The epoch decisions are stamped with: the type cache's (support/config.h),
// which also moves when the configuration is read again and when the device
// byte changes (kernels/memory_kind.h), so a quick bit set under one state
// of those is not read under another. forget_decisions() moves it too.
[[gnu::always_inline]] inline uint64_t epoch() { return g_cache_epoch.load(std::memory_order_acquire); }
// Where `key` lives in a table (its set) and what a slot holding it now
// reads as: its packed key, the tag stamped with the current epoch and kQuick set.
struct Place {
  size_t set;
  PackedKey key;
};
[[gnu::always_inline]] inline Place place_of(const DecisionKey& key) {
  PackedKey k = packed(key);
  const size_t set = set_of(k);
  k.tag = stamped(k.tag, epoch()) | kQuick;
  return {set, k};
}
// The way of `set` holding `k` (tag stamped, kQuick set) for `any`, or null.
[[gnu::always_inline]] inline const Slot* find(const Set& set, const PackedKey& k, uint64_t any) {
  const Slot* ways = set.ways.data();
  if (holds(ways[0].key, k, any)) [[likely]]
    return ways;
  if (holds(ways[1].key, k, any)) return ways + 1;
  return nullptr;
}
}  // namespace detail

// This thread's remembered decision for `key`, and whether it is marked for
// the interposer's quick path (answer_quickly): the library serves the call
// with nothing to note, and when it was marked the caller's conditions held.
// One lookup for both: a decision that is not marked (its choice depends on
// the call's pattern) is at hand for the next question.
struct Recalled {
  const Remembered* decision = nullptr;
  bool quick = false;
};
[[gnu::always_inline]] inline Recalled recall_marked(const DecisionKey& key) {
  const detail::Table* t = detail::t_table;
  if (!t) return {};
  const detail::Place p = detail::place_of(key);
  const detail::Set& set = t->sets[p.set];
  // The common case first: the newest way, marked (five compares, nothing after).
  const detail::Slot& newest = set.ways.front();
  if (detail::holds(newest.key, p.key, 0)) [[likely]]
    return {&newest.decision, true};
  const detail::Slot* s = detail::find(set, p.key, detail::kQuick);
  if (!s) return {};
  return {&s->decision, (s->key.tag & detail::kQuick) != 0};
}
// This thread's remembered decision for `key`, or nullptr.
[[gnu::always_inline]] inline const Remembered* recall_decision(const DecisionKey& key) {
  return recall_marked(key).decision;
}
// Whether recall_marked(key) would say quick (tests).
inline bool library_answers(const DecisionKey& key) { return recall_marked(key).quick; }
// Marks `key`'s remembered decision for recall_marked() where the library
// serves every pattern of it and `allowed()` is true. `allowed` is asked
// after the epoch is read: a change it depends on that moves the epoch (the
// device byte, the configuration) leaves the mark on a stale entry.
template <class Allowed>
void answer_quickly(const DecisionKey& key, Allowed allowed) {
  detail::Table* t = detail::t_table;
  if (!t) return;
  const detail::Place p = detail::place_of(key);
  if (!allowed()) return;
  for (detail::Slot& s : t->sets[p.set].ways)
    if (detail::holds(s.key, p.key, detail::kQuick) && !s.decision.algorithm && !s.decision.varies)
      s.key.tag = p.key.tag;
}
// Remembers `d` for `key` on this thread (call only for keys that may be remembered: see above).
void remember_decision(const DecisionKey& key, const Remembered& d);
// Forgets every decision of every thread (rules, model or profile changed).
void forget_decisions();
// Makes sure every decision about `comm` is forgotten when it is freed: its
// entries alone while the thread that frees it is the only one holding
// state about communicators (hold_communicator_state), else every
// decision (forget_decisions). False if that
// cannot be arranged: decisions about comm must then not be remembered.
bool watch_communicator(MPI_Comm comm);
// Counts this thread, once, among those that hold state keyed by a
// communicator's handle (a decision table; the interposer's noted sizes).
void hold_communicator_state();
// This thread's other state about a communicator being freed, cleared where
// its free forgets that communicator alone (the interposer's noted sizes).
using CommFreedHook = void (*)(MPI_Comm);
void set_comm_freed_hook(CommFreedHook hook);
// Frees the keyval (at MPI_Finalize); decisions are forgotten.
void decisions_finalize();

// The barrier counts (topology::Hierarchy::barriers) of the last few
// communicators this thread noted a barrier on (algorithms::note_barrier),
// so that the next barrier on one counts without asking the library for
// the communicator's hierarchy (an attribute lookup: 40-50 ns under Open
// MPI, on every barrier of OSU's timing loop). A few, not one: a code
// with row and column communicators alternates its barriers between them.
// A note holds in the epoch it was made in, and only for a watched
// communicator, whose free clears it (forget_communicator) or moves the
// epoch.
struct NotedBarriers {
  struct Entry {
    uint64_t comm = 0, epoch = 0;                    // epochs start at 1: an empty entry never holds
    const topology::Hierarchy* hierarchy = nullptr;  // its barriers, counted while barriers_counted
  };
  std::array<Entry, 4> entries{};
  unsigned next = 0;
};
extern thread_local constinit NotedBarriers t_noted_barriers [[gnu::tls_model("initial-exec")]];
// comm's note in this epoch, or null.
[[gnu::always_inline]] inline const NotedBarriers::Entry* noted_barriers(MPI_Comm comm) {
  const uint64_t key = handle_key(comm), epoch = detail::epoch();
  for (const NotedBarriers::Entry& e : t_noted_barriers.entries)
    if (e.comm == key && e.epoch == epoch) return &e;
  return nullptr;
}
// Notes h as comm's hierarchy over the oldest entry, where comm is watched
// (false: not noted).
bool note_barriers_of(MPI_Comm comm, const topology::Hierarchy* h);

}  // namespace veneer::algorithms
