// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Veneer's request table: the library's request handle of every nonblocking
// or persistent operation Veneer took over for the user, with what must happen when it
// completes (free the staging buffer; for receives, unpack into the user's
// buffer). Every completion call consults it; it costs one atomic load when empty.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "interposer/p2p.h"

namespace veneer {

struct Pending {
  bool is_recv = false;
  Outgoing out;  // a send: its staging lives until the request completes
  Incoming in;   // a receive: where it lands and how it is unpacked
  // A persistent request (MPI_Send_init ..., MPI_Recv_init): its entry stays
  // while the request exists; `active` between MPI_Start and its completion.
  bool persistent = false;
  bool active = false;
};

namespace requests {

extern std::atomic<int64_t> g_live;
// Fast check for the completion calls: is anything tracked at all?
inline bool any() { return g_live.load(std::memory_order_acquire) > 0; }

void track(MPI_Request req, Pending pending);
// Removes and returns the entry of `req`, if Veneer tracks it.
std::optional<Pending> take(MPI_Request req);
// Removes the entries of the tracked requests among reqs[0..n), under one lock.
// Completion calls take entries out before the library completes (and frees)
// the request, so that a handle the library recycles for another thread's new
// request can never meet a stale entry; entries of requests that did not
// complete are put back with track().
struct Taken {
  int index;
  MPI_Request handle;
  Pending pending;
};
std::vector<Taken> take_among(int n, const MPI_Request* reqs);
// True if `req` is tracked (entry stays).
bool tracked(MPI_Request req);
// Marks a tracked receive as unpacked after doing `fn` once under the lock.
void unpack_now(MPI_Request req, const MPI_Status& status);

// Finishes a completed operation: unpacks a receive unless it was cancelled
// (a failure is logged; the status stays the library's), once. A persistent
// request that is not active has nothing to finish.
void complete(Pending& pending, const MPI_Status& status);

// MPI_Request_free on a tracked request: the library request is kept and
// progressed by later calls; at the latest it finishes at MPI_Finalize.
void detach(MPI_Request req, Pending pending);
void progress_detached();
void drain_detached();  // at MPI_Finalize
int64_t high_water();
int64_t tracked_count();  // entries now (live and detached)
int64_t detached_count();

}  // namespace requests
}  // namespace veneer
