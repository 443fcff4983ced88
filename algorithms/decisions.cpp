// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/decisions.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "support/log.h"

namespace veneer::algorithms {
namespace detail {
constinit thread_local Table* t_table [[gnu::tls_model("initial-exec")]] = nullptr;
}  // namespace detail

namespace {

using detail::t_table;
using detail::Table;

struct TableOwner {
  std::unique_ptr<Table> table;
  ~TableOwner() { t_table = nullptr; }
};

Table& table() {
  if (!t_table) {
    thread_local TableOwner owner;
    owner.table = std::make_unique<Table>();
    t_table = owner.table.get();
  }
  return *t_table;
}

std::mutex g_keyval_mutex;
int g_keyval = MPI_KEYVAL_INVALID;

int on_comm_free(MPI_Comm /*comm*/, int /*keyval*/, void* /*value*/, void* /*extra*/) {
  forget_decisions();
  return MPI_SUCCESS;
}

}  // namespace

void remember_decision(const DecisionKey& key, const Remembered& d) {
  detail::Place p = detail::place_of(key);
  detail::Set& set = table().sets[p.set];
  // The newest fill goes first; the one it displaces stays as the second way
  // unless it is stale or this very key. A fill is not yet quick (answer_quickly).
  const detail::PackedKey first = set.ways[0].key;
  if (first.tag >> detail::kTagBits == p.key.tag >> detail::kTagBits && !detail::holds(first, p.key, detail::kQuick))
    set.ways[1] = set.ways[0];
  p.key.tag &= ~detail::kQuick;
  set.ways[0] = detail::Slot{p.key, d};
}

void forget_decisions() { g_cache_epoch.fetch_add(1, std::memory_order_acq_rel); }

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

void decisions_finalize() {
  forget_decisions();
  std::lock_guard<std::mutex> lock(g_keyval_mutex);
  // At finalize nothing can be done about a failure but say so.
  if (g_keyval != MPI_KEYVAL_INVALID && PMPI_Comm_free_keyval(&g_keyval) != MPI_SUCCESS)
    log(LogLevel::warn, "collectives: freeing the decisions' communicator keyval failed");
  g_keyval = MPI_KEYVAL_INVALID;
}

}  // namespace veneer::algorithms
