// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/decisions.h"

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "support/log.h"

namespace veneer::algorithms {
namespace detail {
constinit thread_local Table* t_table [[gnu::tls_model("initial-exec")]] = nullptr;
}  // namespace detail
constinit thread_local NotedBarriers t_noted_barriers [[gnu::tls_model("initial-exec")]];

namespace {

using detail::t_table;
using detail::Table;

struct TableOwner {
  std::unique_ptr<Table> table;
  ~TableOwner() { t_table = nullptr; }
};

// The threads holding state keyed by communicators' handles, each counted
// once, until it exits.
std::atomic<int> g_holders{0};
struct Holder {
  bool holds = false;
  ~Holder() {
    if (holds) g_holders.fetch_sub(1, std::memory_order_acq_rel);
  }
};
thread_local Holder t_holder;
std::atomic<CommFreedHook> g_freed_hook{nullptr};

Table& table() {
  if (!t_table) {
    hold_communicator_state();
    thread_local TableOwner owner;
    owner.table = std::make_unique<Table>();
    t_table = owner.table.get();
  }
  return *t_table;
}

std::mutex g_keyval_mutex;
int g_keyval = MPI_KEYVAL_INVALID;

// This thread's decisions about `comm` and its other state about it (the hook).
void forget_communicator(MPI_Comm comm) {
  if (Table* t = t_table) {
    const uint64_t key = handle_key(comm);
    const uint16_t print = detail::comm_print(key);
    // Sixteen prints compared at a time, without a branch; the slots of a
    // group with a match are looked at (a print compared and branched on
    // one by one took 0.5-1 us per free at 1,024 slots).
    constexpr size_t group = 16;
    static_assert(std::tuple_size_v<decltype(t->prints)> % group == 0);
    for (size_t base = 0; base < t->prints.size(); base += group) {
      unsigned match = 0;
#if defined(__SSE2__)
      const __m128i want = _mm_set1_epi16(static_cast<int16_t>(print));
      const auto* at = reinterpret_cast<const __m128i*>(&t->prints[base]);
      const __m128i eq =
          _mm_packs_epi16(_mm_cmpeq_epi16(_mm_loadu_si128(at), want), _mm_cmpeq_epi16(_mm_loadu_si128(at + 1), want));
      match = static_cast<unsigned>(_mm_movemask_epi8(eq));
#else
      for (size_t j = 0; j < group; ++j) match |= static_cast<unsigned>(t->prints[base + j] == print) << j;
#endif
      for (; match; match &= match - 1) {
        const size_t i = base + static_cast<size_t>(std::countr_zero(match));
        detail::Slot& slot = t->sets[i / 2].ways[i % 2];
        if (slot.key.comm == key) slot = detail::Slot{};  // all zeros: never matches
      }
    }
  }
  for (NotedBarriers::Entry& e : t_noted_barriers.entries)
    if (e.comm == handle_key(comm)) e = {};
  if (CommFreedHook hook = g_freed_hook.load(std::memory_order_acquire)) hook(comm);
}

// A watched communicator is being freed. Where the freeing thread is the
// only one holding state about communicators, its entries about `comm` go
// and every other decision stays: forgetting them all (moving the epoch)
// made every collective after a communicator's free decided afresh, 0.6-2
// us each at 2 ranks (Open MPI) in a code that duplicates a communicator
// per solve. A thread that made its table while another frees a
// communicator it uses would break MPI's rules, so it holds nothing about it.
int on_comm_free(MPI_Comm comm, int /*keyval*/, void* /*value*/, void* /*extra*/) {
  if (g_holders.load(std::memory_order_acquire) == 1 && t_holder.holds) forget_communicator(comm);
  else forget_decisions();
  return MPI_SUCCESS;
}

}  // namespace

void remember_decision(const DecisionKey& key, const Remembered& d) {
  detail::Place p = detail::place_of(key);
  Table& t = table();
  detail::Set& set = t.sets[p.set];
  uint16_t* prints = &t.prints[2 * p.set];
  // The newest fill goes first; the one it displaces stays as the second way
  // unless it is stale or this very key. A fill is not yet quick (answer_quickly).
  const detail::PackedKey first = set.ways[0].key;
  if (first.tag >> detail::kTagBits == p.key.tag >> detail::kTagBits && !detail::holds(first, p.key, detail::kQuick)) {
    set.ways[1] = set.ways[0];
    prints[1] = prints[0];
  }
  p.key.tag &= ~detail::kQuick;
  set.ways[0] = detail::Slot{p.key, d};
  prints[0] = detail::comm_print(p.key.comm);
}

void forget_decisions() { g_cache_epoch.fetch_add(1, std::memory_order_acq_rel); }

void hold_communicator_state() {
  if (t_holder.holds) return;
  t_holder.holds = true;
  g_holders.fetch_add(1, std::memory_order_acq_rel);
}

void set_comm_freed_hook(CommFreedHook hook) { g_freed_hook.store(hook, std::memory_order_release); }

bool watch_communicator(MPI_Comm comm) {
  int keyval = MPI_KEYVAL_INVALID;
  {
    std::lock_guard<std::mutex> lock(g_keyval_mutex);
    if (g_keyval == MPI_KEYVAL_INVALID &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_comm_free, &g_keyval, nullptr) != MPI_SUCCESS)
      g_keyval = MPI_KEYVAL_INVALID;
    keyval = g_keyval;
  }
  if (keyval == MPI_KEYVAL_INVALID) return false;
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval, &value, &found) != MPI_SUCCESS) return false;
  return found || PMPI_Comm_set_attr(comm, keyval, nullptr) == MPI_SUCCESS;
}

bool note_barriers_of(MPI_Comm comm, const topology::Hierarchy* h) {
  const uint64_t epoch = detail::epoch();
  hold_communicator_state();
  if (!watch_communicator(comm)) return false;
  NotedBarriers& n = t_noted_barriers;
  n.entries[n.next++ % n.entries.size()] = {.comm = handle_key(comm), .epoch = epoch, .hierarchy = h};
  return true;
}

void decisions_finalize() {
  forget_decisions();
  std::lock_guard<std::mutex> lock(g_keyval_mutex);
  // At finalize nothing can be done about a failure but say so.
  if (g_keyval != MPI_KEYVAL_INVALID && PMPI_Comm_free_keyval(&g_keyval) != MPI_SUCCESS)
    log(LogLevel::warn, "collectives: freeing the decisions' communicator keyval failed");
  g_keyval = MPI_KEYVAL_INVALID;
}

}  // namespace veneer::algorithms
