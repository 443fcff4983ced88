// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/requests.h"

#include <mutex>
#include <unordered_map>
#include <vector>

#include "interposer/forward.h"
#include "support/counters.h"
#include "support/handle.h"
#include "support/log.h"

namespace veneer::requests {

std::atomic<int64_t> g_live{0};

namespace {

uint64_t key_of(MPI_Request h) { return handle_key(h); }

struct Table {
  std::mutex mutex;
  std::unordered_map<uint64_t, Pending> live;
  std::vector<std::pair<MPI_Request, Pending>> detached;
  int64_t high_water = 0;
};

Table& table() {
  static Table* t = new Table;  // outlives static destructors that might still complete requests
  return *t;
}

}  // namespace

void track(MPI_Request req, Pending pending) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.live.insert_or_assign(key_of(req), std::move(pending));
  g_live.store(static_cast<int64_t>(t.live.size() + t.detached.size()), std::memory_order_release);
  t.high_water = std::max<int64_t>(t.high_water, static_cast<int64_t>(t.live.size()));
}

std::optional<Pending> take(MPI_Request req) {
  if (req == MPI_REQUEST_NULL) return std::nullopt;
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.live.find(key_of(req));
  if (it == t.live.end()) return std::nullopt;
  Pending p = std::move(it->second);
  t.live.erase(it);
  g_live.store(static_cast<int64_t>(t.live.size() + t.detached.size()), std::memory_order_release);
  return p;
}

std::vector<Taken> take_among(int n, const MPI_Request* reqs) {
  std::vector<Taken> found;
  Table& t = table();
  std::lock_guard lock(t.mutex);
  if (t.live.empty()) return found;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    auto it = t.live.find(key_of(reqs[i]));
    if (it == t.live.end()) continue;
    found.push_back({i, reqs[i], std::move(it->second)});
    t.live.erase(it);
  }
  g_live.store(static_cast<int64_t>(t.live.size() + t.detached.size()), std::memory_order_release);
  return found;
}

bool tracked(MPI_Request req) {
  if (req == MPI_REQUEST_NULL) return false;
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.live.contains(key_of(req));
}

void complete(Pending& p, const MPI_Status& status) {
  if (!p.is_recv || p.in.unpacked || (p.persistent && !p.active)) return;
  int cancelled = 0;
  if (PMPI_Test_cancelled(&status, &cancelled) != MPI_SUCCESS || cancelled) {
    p.in.unpacked = true;
    return;
  }
  // A failure is logged by finish(); the status stays the library's.
  finish(p.in, status, MPI_SUCCESS);
}

void unpack_now(MPI_Request req, const MPI_Status& status) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.live.find(key_of(req));
  if (it != t.live.end()) complete(it->second, status);
}

void detach(MPI_Request req, Pending pending) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.detached.emplace_back(req, std::move(pending));
  g_live.store(static_cast<int64_t>(t.live.size() + t.detached.size()), std::memory_order_release);
}

void progress_detached() {
  Table& t = table();
  std::unique_lock lock(t.mutex, std::try_to_lock);
  if (!lock.owns_lock() || t.detached.empty()) return;
  for (size_t i = 0; i < t.detached.size();) {
    auto& [req, pending] = t.detached[i];
    int flag = 0;
    MPI_Status status;
    if (PMPI_Test(&req, &flag, &status) == MPI_SUCCESS && flag) {
      complete(pending, status);
      if (pending.persistent && PMPI_Request_free(&req) != MPI_SUCCESS)
        log(LogLevel::warn, "freeing a completed persistent request failed");
      t.detached[i] = std::move(t.detached.back());
      t.detached.pop_back();
    } else {
      ++i;
    }
  }
  g_live.store(static_cast<int64_t>(t.live.size() + t.detached.size()), std::memory_order_release);
}

void drain_detached() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  for (auto& [req, pending] : t.detached) {
    int flag = 0;
    MPI_Status status;
    if (PMPI_Test(&req, &flag, &status) != MPI_SUCCESS) flag = 0;
    if (!flag && pending.is_recv) {
      // Nobody matched it: cancel rather than hang in MPI_Finalize.
      if (PMPI_Cancel(&req) != MPI_SUCCESS || PMPI_Test(&req, &flag, &status) != MPI_SUCCESS) flag = 0;
    }
    if (!flag) {
      // Still in the library's hands: its staging memory must outlive it.
      pending.out.host.leak();
      pending.out.device.storage.leak();
      pending.in.host.leak();
      pending.in.device.storage.leak();
      continue;
    }
    complete(pending, status);
    if (pending.persistent && PMPI_Request_free(&req) != MPI_SUCCESS)
      log(LogLevel::warn, "freeing a completed persistent request at MPI_Finalize failed");
  }
  t.detached.clear();
  g_live.store(static_cast<int64_t>(t.live.size()), std::memory_order_release);
}

int64_t high_water() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.high_water;
}

int64_t tracked_count() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return static_cast<int64_t>(t.live.size() + t.detached.size());
}

int64_t detached_count() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return static_cast<int64_t>(t.detached.size());
}

}  // namespace veneer::requests
