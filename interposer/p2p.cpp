// Sends and receives of non-contiguous host data: Veneer packs into a staging
// buffer and moves bytes; receives land in staging and are unpacked when they
// complete. The status the user sees is the library's own for the byte
// transfer, which carries the same source, tag, error and byte count, so
// MPI_Get_count/MPI_Get_elements on the user's type answer as for a typed receive.
#include <mpi.h>

#include "datatypes/pack.h"
#include "interposer/forward.h"
#include "interposer/requests.h"
#include "interposer/switchboard.h"
#include "support/counters.h"
#include "support/staging.h"

using namespace veneer;

namespace {

using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
using IsendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

Staging pack_staging(const datatypes::Layout& layout, int count, const void* buf, int64_t& bytes) {
  bytes = layout.size * count;
  Staging staging(static_cast<size_t>(bytes));
  if (!staging.get()) return staging;  // out of memory: the caller passes through
  datatypes::pack_all(layout, count, buf, staging.get());
  counters().add(Counter::bytes_packed, static_cast<uint64_t>(bytes));
  return staging;
}

// Receives that failed for another reason than truncation have no data to unpack.
bool has_data(int rc) {
  if (rc == MPI_SUCCESS) return true;
  int cls = MPI_SUCCESS;
  PMPI_Error_class(rc, &cls);
  return cls == MPI_ERR_TRUNCATE;
}

void unpack_received(const datatypes::Layout& layout, int count, void* buf, const char* staging, int64_t capacity,
                     const MPI_Status& status) {
  MPI_Count received = 0;
  PMPI_Get_elements_x(&status, MPI_BYTE, &received);
  if (received == MPI_UNDEFINED || received <= 0) return;
  const int64_t n = std::min<int64_t>(received, capacity);
  datatypes::unpack(layout, count, buf, 0, n, staging);
  counters().add(Counter::bytes_unpacked, static_cast<uint64_t>(n));
}

int blocking_send(SendFn fn, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  auto layout = p2p_layout(buf, count, type, dest);
  if (!layout) {
    counters().add(Counter::send_passed);
    return fn(buf, count, type, dest, tag, comm);
  }
  int64_t bytes = 0;
  Staging staging;
  {
    ScopedTimer timer;
    staging = pack_staging(*layout, count, buf, bytes);
  }
  if (!staging.get()) return fn(buf, count, type, dest, tag, comm);
  counters().add(Counter::send_taken);
  return fn(staging.get(), static_cast<int>(bytes), MPI_BYTE, dest, tag, comm);
}

int nonblocking_send(IsendFn fn, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                     MPI_Request* request) {
  auto layout = request ? p2p_layout(buf, count, type, dest) : nullptr;
  if (!layout) {
    counters().add(Counter::send_passed);
    return fn(buf, count, type, dest, tag, comm, request);
  }
  Pending pending;
  {
    ScopedTimer timer;
    pending.staging = pack_staging(*layout, count, buf, pending.capacity);
  }
  if (!pending.staging.get()) return fn(buf, count, type, dest, tag, comm, request);
  const int rc = fn(pending.staging.get(), static_cast<int>(pending.capacity), MPI_BYTE, dest, tag, comm, request);
  if (rc == MPI_SUCCESS) {
    requests::track(*request, std::move(pending));
    counters().add(Counter::send_taken);
  }
  return rc;
}

}  // namespace

extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Send, buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Ssend, buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Rsend, buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  return nonblocking_send(next::Isend, buf, count, type, dest, tag, comm, request);
}
extern "C" int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* request) {
  return nonblocking_send(next::Issend, buf, count, type, dest, tag, comm, request);
}

extern "C" int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        MPI_Status* status) {
  auto layout = p2p_layout(buf, count, type, source);
  if (!layout) {
    counters().add(Counter::recv_passed);
    return next::Recv(buf, count, type, source, tag, comm, status);
  }
  const int64_t bytes = layout->size * count;
  Staging staging(static_cast<size_t>(bytes));
  if (!staging.get()) return next::Recv(buf, count, type, source, tag, comm, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Recv(staging.get(), static_cast<int>(bytes), MPI_BYTE, source, tag, comm, st);
  if (has_data(rc)) {
    ScopedTimer timer;
    unpack_received(*layout, count, buf, staging.get(), bytes, *st);
  }
  counters().add(Counter::recv_taken);
  return rc;
}

extern "C" int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  auto layout = request ? p2p_layout(buf, count, type, source) : nullptr;
  if (!layout) {
    counters().add(Counter::recv_passed);
    return next::Irecv(buf, count, type, source, tag, comm, request);
  }
  Pending pending;
  pending.is_recv = true;
  pending.capacity = layout->size * count;
  pending.staging = Staging(static_cast<size_t>(pending.capacity));
  if (!pending.staging.get()) return next::Irecv(buf, count, type, source, tag, comm, request);
  pending.layout = layout;
  pending.buf = buf;
  pending.count = count;
  const int rc = next::Irecv(pending.staging.get(), static_cast<int>(pending.capacity), MPI_BYTE, source, tag, comm,
                             request);
  if (rc == MPI_SUCCESS) {
    requests::track(*request, std::move(pending));
    counters().add(Counter::recv_taken);
  }
  return rc;
}

extern "C" int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                            MPI_Comm comm, MPI_Status* status) {
  auto slayout = p2p_layout(sendbuf, sendcount, sendtype, dest);
  auto rlayout = p2p_layout(recvbuf, recvcount, recvtype, source);
  if (!slayout && !rlayout) {
    counters().add(Counter::send_passed);
    counters().add(Counter::recv_passed);
    return next::Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                          recvtag, comm, status);
  }
  Staging sstage, rstage;
  const void* sbuf = sendbuf;
  int scount = sendcount;
  MPI_Datatype stype = sendtype;
  if (slayout) {
    ScopedTimer timer;
    int64_t bytes = 0;
    sstage = pack_staging(*slayout, sendcount, sendbuf, bytes);
    sbuf = sstage.get();
    scount = static_cast<int>(bytes);
    stype = MPI_BYTE;
    counters().add(Counter::send_taken);
  }
  void* rbuf = recvbuf;
  int rcount = recvcount;
  MPI_Datatype rtype = recvtype;
  int64_t rbytes = 0;
  if (rlayout) {
    rbytes = rlayout->size * recvcount;
    rstage = Staging(static_cast<size_t>(rbytes));
    rbuf = rstage.get();
    rcount = static_cast<int>(rbytes);
    rtype = MPI_BYTE;
    counters().add(Counter::recv_taken);
  }
  if ((slayout && !sstage.get()) || (rlayout && !rstage.get()))
    return next::Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                          recvtag, comm, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Sendrecv(sbuf, scount, stype, dest, sendtag, rbuf, rcount, rtype, source, recvtag, comm, st);
  if (rlayout && has_data(rc)) {
    ScopedTimer timer;
    unpack_received(*rlayout, recvcount, recvbuf, rstage.get(), rbytes, *st);
  }
  return rc;
}

extern "C" int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                    int recvtag, MPI_Comm comm, MPI_Status* status) {
  auto layout = p2p_layout(buf, count, type, dest == MPI_PROC_NULL ? source : dest);
  if (!layout) {
    counters().add(Counter::send_passed);
    return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  }
  int64_t bytes = 0;
  Staging out;
  {
    ScopedTimer timer;
    out = pack_staging(*layout, count, buf, bytes);
  }
  Staging in(static_cast<size_t>(bytes));
  if (!out.get() || !in.get())
    return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  const int rc = next::Sendrecv(out.get(), static_cast<int>(bytes), MPI_BYTE, dest, sendtag, in.get(),
                                static_cast<int>(bytes), MPI_BYTE, source, recvtag, comm, st);
  if (source != MPI_PROC_NULL && has_data(rc)) {
    ScopedTimer timer;
    unpack_received(*layout, count, buf, in.get(), bytes, *st);
  }
  counters().add(Counter::send_taken);
  counters().add(Counter::recv_taken);
  return rc;
}
