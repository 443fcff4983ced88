#pragma once
// Veneer's request table: the library's request handle of every nonblocking
// operation Veneer started for the user, with what must happen when it
// completes (free the staging buffer; for receives, unpack into the user's
// buffer). Every completion call consults it; it costs one atomic load when empty.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "datatypes/layout.h"
#include "interposer/device.h"
#include "support/staging.h"

namespace veneer {

struct Pending {
  bool is_recv = false;
  Staging staging;                                  // packed bytes (send: source; recv: landing zone)
  int64_t capacity = 0;                             // bytes in staging
  std::shared_ptr<const datatypes::Layout> layout;  // recv: how to unpack
  void* buf = nullptr;                              // recv: the user's buffer
  int64_t count = 0;                                // recv: the user's count
  bool unpacked = false;                            // recv: already unpacked by Request_get_status
  device::Carried carried;                          // a device buffer: how to unpack into it
  device::Packed device_staging;                    // its packed bytes (pinned host or device memory)
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

// Finishes a completed operation: unpacks a receive unless it was cancelled.
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
