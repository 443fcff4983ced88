// SPDX-License-Identifier: BSD-3-Clause
// Every completion call finishes Veneer's requests: after the library
// completes a request Veneer started, the staging buffer is released and a
// receive is unpacked into the user's buffer before the call returns. A
// request counts as completed when the library set the handle to
// MPI_REQUEST_NULL, a persistent one when the call reports it complete (its
// entry stays, inactive, until MPI_Request_free). Entries are taken
// out of the table before the library call (see requests::take_among) and put
// back if their request did not complete.
#include <mpi.h>

#include <vector>

#include "interposer/forward.h"
#include "interposer/requests.h"

using namespace veneer;

namespace {

// Statuses for the library call: the user's array, or a local one when the
// user passed MPI_STATUSES_IGNORE (Veneer needs byte counts to unpack).
struct StatusArray {
  std::vector<MPI_Status> local;
  MPI_Status* ptr;
  StatusArray(MPI_Status* user, int n) : ptr(user) {
    if (user == MPI_STATUSES_IGNORE) {
      local.resize(static_cast<size_t>(n > 0 ? n : 1));
      ptr = local.data();
    }
  }
};

// Completes or puts back each taken entry; status_of(i) gives the status of
// request i when it completed. A completed request is set to
// MPI_REQUEST_NULL by the library, except a persistent one: it stays, now
// inactive, and so does its entry (completed if it was started and the call
// reports it complete).
template <class StatusOf>
void settle(std::vector<requests::Taken>& taken, const MPI_Request* reqs, bool any_completed, StatusOf status_of) {
  for (auto& t : taken) {
    const MPI_Status* st = any_completed ? status_of(t.index) : nullptr;
    if (t.pending.persistent) {
      if (st && t.pending.active) {
        requests::complete(t.pending, *st);
        t.pending.active = false;
      }
    } else if (st && reqs[t.index] == MPI_REQUEST_NULL) {
      requests::complete(t.pending, *st);
      continue;
    }
    requests::track(t.handle, std::move(t.pending));
  }
}

template <class Call>
int single(MPI_Request* request, MPI_Status* status, Call call, int* flag) {
  auto taken = requests::take_among(1, request);
  if (taken.empty()) return call(status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = call(st);
  settle(taken, request, !flag || *flag, [&](int) { return st; });
  return rc;
}

}  // namespace

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (!requests::any() || !request) return next::Wait(request, status);
  requests::progress_detached();
  return single(
      request, status, [&](MPI_Status* st) { return next::Wait(request, st); }, nullptr);
}

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (!requests::any() || !request || !flag) return next::Test(request, flag, status);
  requests::progress_detached();
  return single(
      request, status, [&](MPI_Status* st) { return next::Test(request, flag, st); }, flag);
}

extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (!requests::any() || count <= 0 || !requests) return next::Waitall(count, requests, statuses);
  requests::progress_detached();
  auto taken = requests::take_among(count, requests);
  if (taken.empty()) return next::Waitall(count, requests, statuses);
  StatusArray st(statuses, count);
  const int rc = next::Waitall(count, requests, st.ptr);
  settle(taken, requests, true, [&](int i) { return &st.ptr[i]; });
  return rc;
}

extern "C" int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (!requests::any() || count <= 0 || !requests || !flag) return next::Testall(count, requests, flag, statuses);
  requests::progress_detached();
  auto taken = requests::take_among(count, requests);
  if (taken.empty()) return next::Testall(count, requests, flag, statuses);
  StatusArray st(statuses, count);
  const int rc = next::Testall(count, requests, flag, st.ptr);
  settle(taken, requests, *flag != 0, [&](int i) { return &st.ptr[i]; });
  return rc;
}

extern "C" int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (!requests::any() || count <= 0 || !requests || !index) return next::Waitany(count, requests, index, status);
  requests::progress_detached();
  auto taken = requests::take_among(count, requests);
  if (taken.empty()) return next::Waitany(count, requests, index, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Waitany(count, requests, index, st);
  settle(taken, requests, *index != MPI_UNDEFINED,
         [&](int i) { return i == *index ? st : static_cast<MPI_Status*>(nullptr); });
  return rc;
}

extern "C" int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (!requests::any() || count <= 0 || !requests || !index || !flag)
    return next::Testany(count, requests, index, flag, status);
  requests::progress_detached();
  auto taken = requests::take_among(count, requests);
  if (taken.empty()) return next::Testany(count, requests, index, flag, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Testany(count, requests, index, flag, st);
  settle(taken, requests, *flag && *index != MPI_UNDEFINED,
         [&](int i) { return i == *index ? st : static_cast<MPI_Status*>(nullptr); });
  return rc;
}

namespace {
template <class Fn>
int some(Fn fn, int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  requests::progress_detached();
  auto taken = requests::take_among(incount, requests);
  if (taken.empty()) return fn(incount, requests, outcount, indices, statuses);
  StatusArray st(statuses, incount);
  const int rc = fn(incount, requests, outcount, indices, st.ptr);
  // Where in the output arrays each completed request's status landed.
  std::vector<int> slot(static_cast<size_t>(incount), -1);
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k)
      if (indices[k] >= 0 && indices[k] < incount) slot[static_cast<size_t>(indices[k])] = k;
  settle(taken, requests, *outcount != MPI_UNDEFINED && *outcount > 0, [&](int i) {
    const int k = slot[static_cast<size_t>(i)];
    return k >= 0 ? &st.ptr[k] : static_cast<MPI_Status*>(nullptr);
  });
  return rc;
}
}  // namespace

extern "C" int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!requests::any() || incount <= 0 || !requests || !outcount || !indices)
    return next::Waitsome(incount, requests, outcount, indices, statuses);
  return some(next::Waitsome, incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!requests::any() || incount <= 0 || !requests || !outcount || !indices)
    return next::Testsome(incount, requests, outcount, indices, statuses);
  return some(next::Testsome, incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Request_free(MPI_Request* request) {
  if (!requests::any() || !request) return next::Request_free(request);
  if (auto p = requests::take(*request)) {
    if (p->persistent && !p->active) {
      // Nothing in flight: the library frees its request, the staging goes with the entry.
      const MPI_Request handle = *request;
      const int rc = next::Request_free(request);
      if (rc != MPI_SUCCESS) requests::track(handle, std::move(*p));
      return rc;
    }
    // The library request stays alive in Veneer's hands until it completes.
    requests::detach(*request, std::move(*p));
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
  }
  return next::Request_free(request);
}

extern "C" int MPI_Cancel(MPI_Request* request) {
  // The entry stays tracked: completion sees the cancelled status and skips the unpack.
  return next::Cancel(request);
}

extern "C" int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (!requests::any() || !flag || !requests::tracked(request)) return next::Request_get_status(request, flag, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Request_get_status(request, flag, st);
  // The user may read the buffer once this says complete: unpack now, once.
  if (rc == MPI_SUCCESS && *flag) requests::unpack_now(request, *st);
  return rc;
}
