// SPDX-License-Identifier: BSD-3-Clause
#include "datatypes/cache.h"

#include <array>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "datatypes/decode.h"
#include "support/config.h"
#include "support/handle.h"
#include "support/log.h"

namespace veneer::datatypes {
namespace {
// Every thread's front until its first fill: no entry is valid (epoch 0), and
// nothing ever writes it.
constinit detail::FrontTable g_no_front{};
}  // namespace

namespace detail {
constinit thread_local FrontTable* t_front [[gnu::tls_model("initial-exec")]] = &g_no_front;
}  // namespace detail

namespace {

uint64_t key_of(MPI_Datatype h) { return handle_key(h); }

struct Entry {
  std::shared_ptr<const Layout> layout;  // null until first use
  bool decoded = false;                  // decode tried (layout null: unsupported)
  bool derived = false;                  // committed through Veneer (note_committed)
  bool unsettled[2] = {false, false};    // counted in g_types_unsettled (blocking, nonblocking)
};

std::atomic<TypePassesRule> g_type_passes{nullptr};
std::atomic<bool (*)()> g_settle_open{nullptr};

// Whether a derived entry's sends and receives of one kind all pass under
// the rule of now.
bool settles(const Entry& e, bool nonblocking) {
  const TypePassesRule rule = g_type_passes.load(std::memory_order_acquire);
  return e.decoded && rule && rule(e.layout.get(), nonblocking);
}
// After a derived entry was decoded (under the cache's lock): counted or not
// by the rule, for each kind of call.
void settle(Entry& e) {
  if (!e.derived) return;
  for (int kind = 0; kind < 2; ++kind) {
    const bool unsettled = !settles(e, kind == 1);
    if (unsettled != e.unsettled[kind]) {
      e.unsettled[kind] = unsettled;
      g_types_unsettled[kind].fetch_add(unsettled ? 1 : -1, std::memory_order_acq_rel);
    }
  }
}
// Forgets a derived entry's counts (under the cache's lock).
void unsettle(Entry& e) {
  for (int kind = 0; kind < 2; ++kind)
    if (std::exchange(e.unsettled[kind], false)) g_types_unsettled[kind].fetch_sub(1, std::memory_order_acq_rel);
}

struct Cache {
  std::shared_mutex mutex;
  std::unordered_map<uint64_t, Entry> entries;
  std::atomic<uint64_t>& epoch = g_cache_epoch;
  // Set at start while other threads may already commit types (MPI initialised behind Veneer's back).
  std::atomic<int> keyval{MPI_KEYVAL_INVALID};
  std::atomic<int64_t> hits{0}, misses{0}, decoded{0}, unsupported{0}, evicted{0};
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: callbacks may run during exit
  return *c;
}

using detail::Front;
using detail::front_hit;
using detail::FrontTable;
using detail::set_of;
using detail::t_front;

struct FrontOwner {
  std::unique_ptr<FrontTable> table;
  ~FrontOwner() { t_front = &g_no_front; }
};

FrontTable& front_table() {
  if (t_front == &g_no_front) {
    thread_local FrontOwner owner;
    owner.table = std::make_unique<FrontTable>();
    t_front = owner.table.get();
  }
  return *t_front;
}

// Stale entries (their type freed, or the cache changed since) still hold
// their layouts: each fill releases those among the next few slots, so that a
// freed type's layout does not live on in a front that never meets its slot again.
constexpr size_t kSweepPerFill = 16;

std::atomic<PassRule> g_pass_rule{nullptr};

// Stores a fresh entry as the most recent of its set (the other one is
// kept if still valid, the older one dropped).
void front_fill(uint64_t key, uint64_t epoch, std::shared_ptr<const Layout> layout) {
  FrontTable& t = front_table();
  for (size_t k = 0; k < kSweepPerFill; ++k) {
    const size_t s = t.sweep;
    t.sweep = (t.sweep + 1) % t.slots.size();
    if (t.slots[s].epoch != epoch && t.layouts[s]) {
      t.slots[s] = Front{};
      t.layouts[s].reset();
    }
  }
  const size_t i = set_of(key);
  if (t.slots[i].key != key && t.slots[i].epoch == epoch) {
    t.slots[i + 1] = t.slots[i];
    t.layouts[i + 1] = std::move(t.layouts[i]);
  }
  Front fresh;
  fresh.key = key;
  fresh.epoch = epoch;
  if (PassRule rule = g_pass_rule.load(std::memory_order_acquire)) rule(layout.get(), fresh);
  t.slots[i] = fresh;
  t.layouts[i] = std::move(layout);
}

std::atomic<FreedLayoutHook> g_freed_hook{nullptr};
std::atomic<FreedTypeHook> g_freed_type_hook{nullptr};

int on_type_free(MPI_Datatype type, int /*keyval*/, void* /*value*/, void* /*extra*/) {
  Cache& c = cache();
  std::shared_ptr<const Layout> layout;
  {
    std::unique_lock lock(c.mutex);
    auto it = c.entries.find(key_of(type));
    if (it != c.entries.end()) {
      layout = std::move(it->second.layout);
      unsettle(it->second);
      c.entries.erase(it);
    }
    c.epoch.fetch_add(1, std::memory_order_release);
  }
  if (FreedLayoutHook hook = g_freed_hook.load(std::memory_order_acquire); hook && layout) hook(layout.get());
  if (FreedTypeHook hook = g_freed_type_hook.load(std::memory_order_acquire)) hook();
  return MPI_SUCCESS;
}

std::shared_ptr<const Layout> build(MPI_Datatype type) {
  Cache& c = cache();
  auto result = decode(type);
  if (auto* e = std::get_if<DecodeError>(&result)) {
    c.unsupported.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::info, "type passes through: %s", e->why.c_str());
    return nullptr;
  }
  c.decoded.fetch_add(1, std::memory_order_relaxed);
  auto layout = std::make_shared<const Layout>(std::move(std::get<Layout>(result)));
  log(LogLevel::debug, "type layout: %s", layout->describe().c_str());
  return layout;
}

}  // namespace

void set_freed_layout_hook(FreedLayoutHook hook) { g_freed_hook.store(hook, std::memory_order_release); }
void set_freed_type_hook(FreedTypeHook hook) { g_freed_type_hook.store(hook, std::memory_order_release); }

bool watched(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return false;
  Cache& c = cache();
  std::shared_lock lock(c.mutex);
  return c.entries.contains(key_of(type));
}

void set_settle_rule(TypePassesRule type_passes, bool (*open)()) {
  g_type_passes.store(type_passes, std::memory_order_release);
  g_settle_open.store(open, std::memory_order_release);
  for (auto& count : g_types_unsettled) count.fetch_add(kTypesRecount, std::memory_order_acq_rel);
}

void set_pass_rule(PassRule rule) {
  g_pass_rule.store(rule, std::memory_order_release);
  g_cache_epoch.fetch_add(1, std::memory_order_release);  // entries filled under the old rule
}

void cache_init() {
  Cache& c = cache();
  std::unique_lock lock(c.mutex);
  if (c.keyval.load() == MPI_KEYVAL_INVALID) {
    int keyval = MPI_KEYVAL_INVALID;
    if (PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, on_type_free, &keyval, nullptr) == MPI_SUCCESS)
      c.keyval.store(keyval);
  }
}

void cache_finalize() {
  Cache& c = cache();
  std::unique_lock lock(c.mutex);
  c.entries.clear();
  for (auto& count : g_types_unsettled) count.fetch_add(kTypesRecount, std::memory_order_acq_rel);
  c.epoch.fetch_add(1, std::memory_order_release);
  if (int keyval = c.keyval.exchange(MPI_KEYVAL_INVALID);
      keyval != MPI_KEYVAL_INVALID && PMPI_Type_free_keyval(&keyval) != MPI_SUCCESS)
    log(LogLevel::debug, "datatypes: MPI_Type_free_keyval failed at finalize (nothing else depends on it)");
}

void note_committed(MPI_Datatype type) {
  Cache& c = cache();
  const int keyval = c.keyval.load();
  if (type == MPI_DATATYPE_NULL || keyval == MPI_KEYVAL_INVALID) return;
  const std::optional<int> combiner = combiner_of(type);
  if (!combiner || *combiner == MPI_COMBINER_NAMED) return;
  const uint64_t key = key_of(type);
  {
    std::shared_lock lock(c.mutex);
    if (c.entries.contains(key)) return;
  }
  // The attribute's delete callback removes the entry when the type is freed.
  if (PMPI_Type_set_attr(type, keyval, nullptr) != MPI_SUCCESS) return;
  {
    std::unique_lock lock(c.mutex);
    Entry counted;
    counted.derived = counted.unsettled[0] = counted.unsettled[1] = true;
    if (!c.entries.emplace(key, std::move(counted)).second) return;
    for (auto& count : g_types_unsettled) count.fetch_add(1, std::memory_order_acq_rel);
  }
  // Decoded now, not at first use: a type that only a file view or a window
  // uses would otherwise hold every send and receive of the job on the full
  // path (every_type_passes) for as long as it lives.
  (void)lookup(type);
}

namespace {
// Counts the derived types again under the rules of now, after the
// configuration changed (g_types_unsettled at or above kTypesRecount). Types
// not decoded since count until they are.
void recount(Cache& c) {
  bool (*open)() = g_settle_open.load(std::memory_order_acquire);
  const bool counted_one_by_one = !open || !open();
  std::unique_lock lock(c.mutex);
  for (int kind = 0; kind < 2; ++kind) {
    int64_t seen = g_types_unsettled[kind].load(std::memory_order_acquire);
    if (seen < kTypesRecount) continue;  // another thread counted
    int64_t unsettled = counted_one_by_one ? 1 : 0;
    for (auto& [key, e] : c.entries) {
      if (!e.derived) continue;
      e.unsettled[kind] = !settles(e, kind == 1);
      unsettled += e.unsettled[kind] ? 1 : 0;
    }
    // Every other change of the count is made under the lock; a change of
    // the configuration meanwhile leaves it at or above kTypesRecount
    // (counted again at the next miss).
    (void)g_types_unsettled[kind].compare_exchange_strong(seen, unsettled, std::memory_order_acq_rel);
  }
}
}  // namespace

std::shared_ptr<const Layout> lookup(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  Cache& c = cache();
  const uint64_t key = key_of(type);
  const uint64_t epoch = c.epoch.load(std::memory_order_acquire);
  if (const Front* f = front_hit(key, epoch)) {
    if (config().report != 0) c.hits.fetch_add(1, std::memory_order_relaxed);  // a shared line: only when reported
    return detail::layout_of(f);
  }
  c.misses.fetch_add(1, std::memory_order_relaxed);
  if (g_types_unsettled[0].load(std::memory_order_acquire) >= kTypesRecount ||
      g_types_unsettled[1].load(std::memory_order_acquire) >= kTypesRecount) [[unlikely]]
    recount(c);
  bool known = false;
  {
    std::shared_lock lock(c.mutex);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      known = true;
      if (it->second.decoded) {
        front_fill(key, epoch, it->second.layout);
        return it->second.layout;
      }
    }
  }
  if (!known) {
    // Predefined types are always committed; anything else unknown is not ours.
    const std::optional<int> combiner = combiner_of(type);
    if (!combiner || *combiner != MPI_COMBINER_NAMED) return nullptr;
  }
  auto layout = build(type);
  std::unique_lock lock(c.mutex);
  if (static_cast<int64_t>(c.entries.size()) >= config().type_cache_limit) {
    // Over the limit: forget decoded layouts (kept types are re-decoded on use).
    for (auto& [k, e] : c.entries) {
      if (e.layout) c.evicted.fetch_add(1, std::memory_order_relaxed);
      e.layout.reset();
      e.decoded = false;
    }
    c.epoch.fetch_add(1, std::memory_order_release);
  }
  if (!known) {
    c.entries[key] = Entry{layout, true};
  } else {
    auto it = c.entries.find(key);
    if (it == c.entries.end()) return layout;  // freed meanwhile: use once, keep nothing
    it->second.layout = layout;
    it->second.decoded = true;
    settle(it->second);
  }
  front_fill(key, c.epoch.load(std::memory_order_acquire), layout);
  return layout;
}

const Layout* detail::peek_slow(MPI_Datatype type) {
  Cache& c = cache();
  const uint64_t key = key_of(type);
  // A miss fills this thread's front, which then holds the reference; when
  // it did not (a race with a free), answer "unknown" and let the call pass.
  auto layout = lookup(type);
  const Front* f = layout ? front_hit(key, c.epoch.load(std::memory_order_acquire)) : nullptr;
  return f && detail::layout_of(f) == layout ? layout.get() : nullptr;
}

CacheStats cache_stats() {
  Cache& c = cache();
  std::shared_lock lock(c.mutex);
  return {static_cast<int64_t>(c.entries.size()),
          c.hits.load(),
          c.misses.load(),
          c.decoded.load(),
          c.unsupported.load(),
          c.evicted.load()};
}

}  // namespace veneer::datatypes
