// Every completion call finishes Veneer's requests: after the library
// completes a request Veneer started, the staging buffer is released and a
// receive is unpacked into the user's buffer before the call returns. A
// request counts as completed when the library set the handle to
// MPI_REQUEST_NULL (Veneer never tracks persistent requests).
#include <mpi.h>

#include <vector>

#include "interposer/forward.h"
#include "interposer/requests.h"

using namespace veneer;

namespace {

void finish(MPI_Request handle, const MPI_Status& status) {
  if (auto p = requests::take(handle)) requests::complete(*p, status);
}

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

}  // namespace

extern "C" int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (!requests::any() || !request) return next::Wait(request, status);
  requests::progress_detached();
  const MPI_Request handle = *request;
  if (!requests::tracked(handle)) return next::Wait(request, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Wait(request, st);
  if (*request == MPI_REQUEST_NULL) finish(handle, *st);
  return rc;
}

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (!requests::any() || !request) return next::Test(request, flag, status);
  requests::progress_detached();
  const MPI_Request handle = *request;
  if (!requests::tracked(handle)) return next::Test(request, flag, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Test(request, flag, st);
  if (*flag && *request == MPI_REQUEST_NULL) finish(handle, *st);
  return rc;
}

extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (!requests::any() || count <= 0 || !requests) return next::Waitall(count, requests, statuses);
  requests::progress_detached();
  auto mine = requests::tracked_among(count, requests);
  if (mine.empty()) return next::Waitall(count, requests, statuses);
  StatusArray st(statuses, count);
  const int rc = next::Waitall(count, requests, st.ptr);
  for (auto [i, handle] : mine)
    if (requests[i] == MPI_REQUEST_NULL) finish(handle, st.ptr[i]);
  return rc;
}

extern "C" int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (!requests::any() || count <= 0 || !requests) return next::Testall(count, requests, flag, statuses);
  requests::progress_detached();
  auto mine = requests::tracked_among(count, requests);
  if (mine.empty()) return next::Testall(count, requests, flag, statuses);
  StatusArray st(statuses, count);
  const int rc = next::Testall(count, requests, flag, st.ptr);
  if (*flag)
    for (auto [i, handle] : mine)
      if (requests[i] == MPI_REQUEST_NULL) finish(handle, st.ptr[i]);
  return rc;
}

extern "C" int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (!requests::any() || count <= 0 || !requests) return next::Waitany(count, requests, index, status);
  requests::progress_detached();
  auto mine = requests::tracked_among(count, requests);
  if (mine.empty()) return next::Waitany(count, requests, index, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Waitany(count, requests, index, st);
  if (*index != MPI_UNDEFINED)
    for (auto [i, handle] : mine)
      if (i == *index && requests[i] == MPI_REQUEST_NULL) finish(handle, *st);
  return rc;
}

extern "C" int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (!requests::any() || count <= 0 || !requests) return next::Testany(count, requests, index, flag, status);
  requests::progress_detached();
  auto mine = requests::tracked_among(count, requests);
  if (mine.empty()) return next::Testany(count, requests, index, flag, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Testany(count, requests, index, flag, st);
  if (*flag && *index != MPI_UNDEFINED)
    for (auto [i, handle] : mine)
      if (i == *index && requests[i] == MPI_REQUEST_NULL) finish(handle, *st);
  return rc;
}

namespace {
template <class Fn>
int some(Fn fn, int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  requests::progress_detached();
  auto mine = requests::tracked_among(incount, requests);
  if (mine.empty()) return fn(incount, requests, outcount, indices, statuses);
  StatusArray st(statuses, incount);
  const int rc = fn(incount, requests, outcount, indices, st.ptr);
  if (*outcount == MPI_UNDEFINED) return rc;
  std::vector<MPI_Request> saved(static_cast<size_t>(incount), MPI_REQUEST_NULL);
  for (auto [i, handle] : mine) saved[static_cast<size_t>(i)] = handle;
  for (int k = 0; k < *outcount; ++k) {
    const int i = indices[k];
    if (i >= 0 && i < incount && saved[static_cast<size_t>(i)] != MPI_REQUEST_NULL && requests[i] == MPI_REQUEST_NULL)
      finish(saved[static_cast<size_t>(i)], st.ptr[k]);
  }
  return rc;
}
}  // namespace

extern "C" int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  if (!requests::any() || incount <= 0 || !requests)
    return next::Waitsome(incount, requests, outcount, indices, statuses);
  return some(next::Waitsome, incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                            MPI_Status statuses[]) {
  if (!requests::any() || incount <= 0 || !requests)
    return next::Testsome(incount, requests, outcount, indices, statuses);
  return some(next::Testsome, incount, requests, outcount, indices, statuses);
}

extern "C" int MPI_Request_free(MPI_Request* request) {
  if (!requests::any() || !request) return next::Request_free(request);
  if (auto p = requests::take(*request)) {
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
  if (!requests::any() || !requests::tracked(request)) return next::Request_get_status(request, flag, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Request_get_status(request, flag, st);
  // The user may read the buffer once this says complete: unpack now, once.
  if (rc == MPI_SUCCESS && *flag) requests::unpack_now(request, *st);
  return rc;
}
