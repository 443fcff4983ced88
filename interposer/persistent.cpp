// SPDX-License-Identifier: BSD-3-Clause
// MPI_Start / MPI_Startall of the persistent requests Veneer took over
// (device buffers, see MPI_Send_init ... in interposer/p2p.cpp): a send's
// device buffer is packed into the request's staging again before the
// library starts it, as the user may have changed it since the last round;
// a receive is marked started, so that its completion unpacks it once.
// Other requests go to the library untouched.
#include <mpi.h>

#include "interposer/forward.h"
#include "interposer/requests.h"

using namespace veneer;

namespace {

void mark_started(Pending& p) {
  p.active = true;
  p.in.unpacked = false;
}

}  // namespace

extern "C" int MPI_Start(MPI_Request* request) {
  if (!requests::any() || !request) return next::Start(request);
  auto p = requests::take(*request);
  if (!p) return next::Start(request);
  const MPI_Request handle = *request;
  int rc = p->persistent ? repack(p->out) : MPI_SUCCESS;
  if (rc == MPI_SUCCESS) rc = next::Start(request);
  if (rc == MPI_SUCCESS && p->persistent) mark_started(*p);
  requests::track(handle, std::move(*p));
  return rc;
}

extern "C" int MPI_Startall(int count, MPI_Request requests[]) {
  if (!requests::any() || count <= 0 || !requests) return next::Startall(count, requests);
  auto taken = requests::take_among(count, requests);
  if (taken.empty()) return next::Startall(count, requests);
  // All packed before any starts: a failure starts none.
  int rc = MPI_SUCCESS;
  for (auto& t : taken)
    if (t.pending.persistent && (rc = repack(t.pending.out)) != MPI_SUCCESS) break;
  if (rc == MPI_SUCCESS) rc = next::Startall(count, requests);
  for (auto& t : taken) {
    if (rc == MPI_SUCCESS && t.pending.persistent) mark_started(t.pending);
    requests::track(t.handle, std::move(t.pending));
  }
  return rc;
}
