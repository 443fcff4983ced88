// SPDX-License-Identifier: BSD-3-Clause
#include "datatypes/cache.h"

#include <array>
#include <atomic>
#include <map>
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

using detail::kAlwaysPasses;

uint64_t key_of(MPI_Datatype h) { return handle_key(h); }

struct Entry {
  std::shared_ptr<const Layout> layout;  // null until first use
  bool decoded = false;                  // decode tried (layout null: unsupported)
  bool derived = false;                  // committed through Veneer (note_committed)
  // Per kind of call (blocking, nonblocking): fewer elements than this
  // always go to the library; below kAlwaysPasses, counted in
  // g_types_unsettled and in g_counted.
  int32_t below[2] = {kAlwaysPasses, kAlwaysPasses};
  int64_t size = -1;  // bytes of one element, from the commit (derived types)
};

std::atomic<PassesBelowRule> g_passes_below{nullptr};
std::atomic<SizeBelowRule> g_size_below{nullptr};
std::atomic<bool (*)()> g_settle_open{nullptr};

// Under the cache's lock: the `below` of every counted type, by value (how
// many types have each), per kind; and whether passes were being counted
// one by one when the types were last counted.
std::map<int32_t, int64_t> g_counted[2];
bool g_one_by_one = false;

// The count below which a derived entry's sends and receives of one kind all
// pass under the rule of now: by its layout once decoded, before that by its
// size alone (0 without a rule).
int32_t passes_below(const Entry& e, bool nonblocking) {
  if (e.decoded) {
    const PassesBelowRule rule = g_passes_below.load(std::memory_order_acquire);
    return rule ? rule(e.layout.get(), nonblocking) : 0;
  }
  const SizeBelowRule rule = g_size_below.load(std::memory_order_acquire);
  return rule && e.size >= 0 ? rule(e.size, nonblocking) : 0;
}

// g_lean_below of one kind from the count and the least counted `below`
// (under the cache's lock). A change of the configuration adds to the count
// and then stores 0 without the lock: read the count again after the store,
// so that the last store is 0 whichever came first.
void publish(int kind) {
  const int64_t n = g_types_unsettled[kind].load();
  int32_t lean = kAlwaysPasses;
  if (n >= kTypesRecount || g_one_by_one) lean = 0;
  else if (n > 0) lean = g_counted[kind].empty() ? 0 : g_counted[kind].begin()->first;
  g_lean_below[kind].store(lean);
  if (lean != 0 && g_types_unsettled[kind].load() >= kTypesRecount) g_lean_below[kind].store(0);
}

// Sets a derived entry's `below` of one kind, counting it in or out (under
// the cache's lock; published by the caller).
void count_as(Entry& e, int kind, int32_t below) {
  const int32_t was = std::exchange(e.below[kind], below);
  if (was == below) return;
  if (was < kAlwaysPasses) {
    auto it = g_counted[kind].find(was);
    if (it != g_counted[kind].end() && --it->second == 0) g_counted[kind].erase(it);
    g_types_unsettled[kind].fetch_sub(1, std::memory_order_acq_rel);
  }
  if (below < kAlwaysPasses) {
    ++g_counted[kind][below];
    g_types_unsettled[kind].fetch_add(1, std::memory_order_acq_rel);
  }
}
// After a derived entry was committed or decoded (under the cache's lock):
// counted by the rule, for each kind of call.
void settle(Entry& e) {
  if (!e.derived) return;
  for (int kind = 0; kind < 2; ++kind) {
    count_as(e, kind, passes_below(e, kind == 1));
    publish(kind);
  }
}
// Forgets a derived entry's counts (under the cache's lock).
void unsettle(Entry& e) {
  for (int kind = 0; kind < 2; ++kind) {
    count_as(e, kind, kAlwaysPasses);
    publish(kind);
  }
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
  if (logs(LogLevel::debug)) log(LogLevel::debug, "type layout: %s", layout->describe().c_str());
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

void set_settle_rule(PassesBelowRule passes_below, SizeBelowRule size_below, bool (*open)()) {
  g_passes_below.store(passes_below, std::memory_order_release);
  g_size_below.store(size_below, std::memory_order_release);
  g_settle_open.store(open, std::memory_order_release);
  for (auto& count : g_types_unsettled) count.fetch_add(kTypesRecount);
  for (auto& below : g_lean_below) below.store(0);
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
  for (auto& counted : g_counted) counted.clear();
  for (auto& count : g_types_unsettled) count.fetch_add(kTypesRecount);
  for (auto& below : g_lean_below) below.store(0);
  c.epoch.fetch_add(1, std::memory_order_release);
  if (int keyval = c.keyval.exchange(MPI_KEYVAL_INVALID);
      keyval != MPI_KEYVAL_INVALID && PMPI_Type_free_keyval(&keyval) != MPI_SUCCESS)
    log(LogLevel::debug, "datatypes: MPI_Type_free_keyval failed at finalize (nothing else depends on it)");
}

namespace {
// Counts the derived types again under the rules of now, after the
// configuration changed (g_types_unsettled at or above kTypesRecount). Types
// not decoded (not used yet, or evicted) count by their size.
void recount(Cache& c) {
  bool (*open)() = g_settle_open.load(std::memory_order_acquire);
  const bool counted_one_by_one = !open || !open();
  std::unique_lock lock(c.mutex);
  for (int kind = 0; kind < 2; ++kind) {
    int64_t seen = g_types_unsettled[kind].load(std::memory_order_acquire);
    if (seen < kTypesRecount) continue;  // another thread counted
    g_one_by_one = counted_one_by_one;
    g_counted[kind].clear();
    int64_t unsettled = counted_one_by_one ? 1 : 0;
    for (auto& [key, e] : c.entries) {
      if (!e.derived) continue;
      e.below[kind] = passes_below(e, kind == 1);
      if (e.below[kind] < kAlwaysPasses) {
        ++g_counted[kind][e.below[kind]];
        ++unsettled;
      }
    }
    // Every other change of the count is made under the lock; a change of
    // the configuration meanwhile leaves it at or above kTypesRecount
    // (counted again at the next miss).
    (void)g_types_unsettled[kind].compare_exchange_strong(seen, unsettled, std::memory_order_acq_rel);
    publish(kind);
  }
}
// Counts again if the configuration moved since the last count.
void recount_if_moved(Cache& c) {
  if (g_types_unsettled[0].load(std::memory_order_acquire) >= kTypesRecount ||
      g_types_unsettled[1].load(std::memory_order_acquire) >= kTypesRecount) [[unlikely]]
    recount(c);
}
}  // namespace

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
  // Counted by its size until it is first used (decoding it here would cost
  // a commit and free 2-3 us over the library's 0.1-0.5): a type that only a
  // file view uses then holds no send or receive of fewer bytes than the
  // smallest message taken over off the lean path.
  MPI_Count size = -1;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS) size = -1;
  recount_if_moved(c);
  std::unique_lock lock(c.mutex);
  Entry counted;
  counted.derived = true;
  counted.size = static_cast<int64_t>(size);
  auto [it, fresh] = c.entries.emplace(key, std::move(counted));
  if (fresh) settle(it->second);
}

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
  recount_if_moved(c);
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
