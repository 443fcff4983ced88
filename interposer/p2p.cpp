// Sends and receives of non-contiguous host data: Veneer packs into a staging
// buffer and moves bytes; receives land in staging and are unpacked when they
// complete. The status the user sees is the library's own for the byte
// transfer, which carries the same source, tag, error and byte count, so
// MPI_Get_count/MPI_Get_elements on the user's type answer as for a typed receive.
// Device buffers (interposer/device.h) travel the same way, packed on the GPU
// into pinned host memory (or device memory for a CUDA-aware library).
#include <mpi.h>

#include <climits>

#include "datatypes/pack.h"
#include "interposer/device.h"
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

// A device buffer Veneer carries for a send or receive with `peer`, or empty.
device::Carried carried(const void* buf, int count, MPI_Datatype type, int peer) {
  const Config& cfg = config();
  if (!takes_send(cfg) || !carries_device(cfg) || peer == MPI_PROC_NULL || count <= 0 ||
      !kernels::device_memory_possible() || !kernels::device_runtime())
    return {};
  device::Carried c = device::classify(buf, count, type, true);
  if (c && c.bytes > INT_MAX) {
    counters().add(Counter::device_passed);
    return {};  // a byte count the library's int cannot hold
  }
  return c;
}

// Unpacks a received message into a device buffer; the library's return code,
// or MPI_ERR_INTERN if the device failed (the data did not arrive).
int unpack_device(const device::Carried& c, int count, void* buf, const device::Packed& landing,
                  const MPI_Status& status, int rc) {
  MPI_Count received = 0;
  PMPI_Get_elements_x(&status, MPI_BYTE, &received);
  if (received == MPI_UNDEFINED || received <= 0) return rc;
  return device::unpack_from_library(c, count, buf, landing, received) ? rc : MPI_ERR_INTERN;
}

int blocking_send(SendFn fn, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (p2p_passes(count, type, dest)) {
    counters().add(Counter::send_passed);
    return fn(buf, count, type, dest, tag, comm);
  }
  if (device::Carried c = carried(buf, count, type, dest)) {
    device::Packed packed;
    if (device::pack_for_library(c, count, buf, packed)) {
      counters().add(Counter::send_taken);
      return fn(packed.data, static_cast<int>(packed.bytes), MPI_BYTE, dest, tag, comm);
    }
    counters().add(Counter::device_passed);
    return fn(buf, count, type, dest, tag, comm);
  }
  auto layout = p2p_layout(buf, count, type, dest, comm);
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
  if (p2p_passes(count, type, dest)) {
    counters().add(Counter::send_passed);
    return fn(buf, count, type, dest, tag, comm, request);
  }
  if (device::Carried c = request ? carried(buf, count, type, dest) : device::Carried{}) {
    Pending pending;
    if (!device::pack_for_library(c, count, buf, pending.device_staging)) {
      counters().add(Counter::device_passed);
      return fn(buf, count, type, dest, tag, comm, request);
    }
    const int rc = fn(pending.device_staging.data, static_cast<int>(pending.device_staging.bytes), MPI_BYTE, dest, tag,
                      comm, request);
    if (rc == MPI_SUCCESS) {
      requests::track(*request, std::move(pending));
      counters().add(Counter::send_taken);
    }
    return rc;
  }
  auto layout = request ? p2p_layout(buf, count, type, dest, comm) : nullptr;
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

// Out of line with the entry point's own arguments, so the entry point jumps here without a frame.
[[gnu::noinline]] int send_slow(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Send, buf, count, type, dest, tag, comm);
}
[[gnu::noinline]] int isend_slow(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                 MPI_Request* request) {
  return nonblocking_send(next::Isend, buf, count, type, dest, tag, comm, request);
}

}  // namespace

extern "C" int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (p2p_passes(count, type, dest)) {
    counters().add(Counter::send_passed);
    return next::Send(buf, count, type, dest, tag, comm);
  }
  return send_slow(buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Ssend, buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return blocking_send(next::Rsend, buf, count, type, dest, tag, comm);
}
extern "C" int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (p2p_passes(count, type, dest)) {
    counters().add(Counter::send_passed);
    return next::Isend(buf, count, type, dest, tag, comm, request);
  }
  return isend_slow(buf, count, type, dest, tag, comm, request);
}
extern "C" int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                          MPI_Request* request) {
  return nonblocking_send(next::Issend, buf, count, type, dest, tag, comm, request);
}

namespace {
[[gnu::noinline]] int recv_slow(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                MPI_Status* status) {
  if (device::Carried c = carried(buf, count, type, source)) {
    device::Packed landing;
    if (!device::landing_for_library(c, landing)) {
      counters().add(Counter::device_passed);
      return next::Recv(buf, count, type, source, tag, comm, status);
    }
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = next::Recv(landing.storage.get(), static_cast<int>(c.bytes), MPI_BYTE, source, tag, comm, st);
    if (has_data(rc)) rc = unpack_device(c, count, buf, landing, *st, rc);
    counters().add(Counter::recv_taken);
    return rc;
  }
  auto layout = p2p_layout(buf, count, type, source, comm);
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

[[gnu::noinline]] int irecv_slow(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                 MPI_Request* request) {
  if (device::Carried c = request ? carried(buf, count, type, source) : device::Carried{}) {
    Pending pending;
    pending.is_recv = true;
    if (!device::landing_for_library(c, pending.device_staging)) {
      counters().add(Counter::device_passed);
      return next::Irecv(buf, count, type, source, tag, comm, request);
    }
    pending.buf = buf;
    pending.count = count;
    const int rc = next::Irecv(pending.device_staging.storage.get(), static_cast<int>(c.bytes), MPI_BYTE, source, tag,
                               comm, request);
    pending.carried = std::move(c);
    if (rc == MPI_SUCCESS) {
      requests::track(*request, std::move(pending));
      counters().add(Counter::recv_taken);
    }
    return rc;
  }
  auto layout = request ? p2p_layout(buf, count, type, source, comm) : nullptr;
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
  const int rc =
      next::Irecv(pending.staging.get(), static_cast<int>(pending.capacity), MPI_BYTE, source, tag, comm, request);
  if (rc == MPI_SUCCESS) {
    requests::track(*request, std::move(pending));
    counters().add(Counter::recv_taken);
  }
  return rc;
}

}  // namespace

// The common pass-through in a few instructions (no stack frame), the rest out of line.
extern "C" int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        MPI_Status* status) {
  if (p2p_passes(count, type, source)) {
    counters().add(Counter::recv_passed);
    return next::Recv(buf, count, type, source, tag, comm, status);
  }
  return recv_slow(buf, count, type, source, tag, comm, status);
}

extern "C" int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                         MPI_Request* request) {
  if (p2p_passes(count, type, source)) {
    counters().add(Counter::recv_passed);
    return next::Irecv(buf, count, type, source, tag, comm, request);
  }
  return irecv_slow(buf, count, type, source, tag, comm, request);
}

// Matched receives (after MPI_Mprobe/MPI_Improbe): the message is already
// matched, so only the buffer is Veneer's. A device buffer lands in pinned
// (CUDA-aware library: device) memory and is unpacked from there; everything
// else, host buffers of any type included, goes to the library.
extern "C" int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (message && *message != MPI_MESSAGE_NO_PROC) {
    if (device::Carried c = carried(buf, count, type, 0)) {
      device::Packed landing;
      if (device::landing_for_library(c, landing)) {
        MPI_Status local;
        MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
        int rc = next::Mrecv(landing.storage.get(), static_cast<int>(c.bytes), MPI_BYTE, message, st);
        if (has_data(rc)) rc = unpack_device(c, count, buf, landing, *st, rc);
        counters().add(Counter::recv_taken);
        return rc;
      }
      counters().add(Counter::device_passed);
    }
  }
  counters().add(Counter::recv_passed);
  return next::Mrecv(buf, count, type, message, status);
}

extern "C" int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  if (request && message && *message != MPI_MESSAGE_NO_PROC) {
    if (device::Carried c = carried(buf, count, type, 0)) {
      Pending pending;
      pending.is_recv = true;
      if (device::landing_for_library(c, pending.device_staging)) {
        pending.buf = buf;
        pending.count = count;
        const int rc =
            next::Imrecv(pending.device_staging.storage.get(), static_cast<int>(c.bytes), MPI_BYTE, message, request);
        pending.carried = std::move(c);
        if (rc == MPI_SUCCESS) {
          requests::track(*request, std::move(pending));
          counters().add(Counter::recv_taken);
        }
        return rc;
      }
      counters().add(Counter::device_passed);
    }
  }
  counters().add(Counter::recv_passed);
  return next::Imrecv(buf, count, type, message, request);
}

// Sendrecv: each side independently passed through, packed on the host, or
// carried from/to device memory.
extern "C" int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                            MPI_Status* status) {
  device::Carried sdev = carried(sendbuf, sendcount, sendtype, dest);
  device::Carried rdev = carried(recvbuf, recvcount, recvtype, source);
  auto slayout = sdev ? nullptr : p2p_layout(sendbuf, sendcount, sendtype, dest, comm);
  auto rlayout = rdev ? nullptr : p2p_layout(recvbuf, recvcount, recvtype, source, comm);
  auto pass = [&] {
    return next::Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
  };
  if (!sdev && !rdev && !slayout && !rlayout) {
    counters().add(Counter::send_passed);
    counters().add(Counter::recv_passed);
    return pass();
  }
  Staging sstage, rstage;
  device::Packed sdevstage, rdevstage;
  const void* sbuf = sendbuf;
  int scount = sendcount;
  MPI_Datatype stype = sendtype;
  if (sdev) {
    if (!device::pack_for_library(sdev, sendcount, sendbuf, sdevstage)) return pass();
    sbuf = sdevstage.data;
    scount = static_cast<int>(sdevstage.bytes);
    stype = MPI_BYTE;
  } else if (slayout) {
    ScopedTimer timer;
    int64_t bytes = 0;
    sstage = pack_staging(*slayout, sendcount, sendbuf, bytes);
    if (!sstage.get()) return pass();
    sbuf = sstage.get();
    scount = static_cast<int>(bytes);
    stype = MPI_BYTE;
  }
  void* rbuf = recvbuf;
  int rcount = recvcount;
  MPI_Datatype rtype = recvtype;
  int64_t rbytes = 0;
  if (rdev) {
    if (!device::landing_for_library(rdev, rdevstage)) return pass();
    rbuf = rdevstage.storage.get();
    rcount = static_cast<int>(rdev.bytes);
    rtype = MPI_BYTE;
  } else if (rlayout) {
    rbytes = rlayout->size * recvcount;
    rstage = Staging(static_cast<size_t>(rbytes));
    if (!rstage.get()) return pass();
    rbuf = rstage.get();
    rcount = static_cast<int>(rbytes);
    rtype = MPI_BYTE;
  }
  counters().add(sdev || slayout ? Counter::send_taken : Counter::send_passed);
  counters().add(rdev || rlayout ? Counter::recv_taken : Counter::recv_passed);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = next::Sendrecv(sbuf, scount, stype, dest, sendtag, rbuf, rcount, rtype, source, recvtag, comm, st);
  if (rdev && has_data(rc)) {
    rc = unpack_device(rdev, recvcount, recvbuf, rdevstage, *st, rc);
  } else if (rlayout && has_data(rc)) {
    ScopedTimer timer;
    unpack_received(*rlayout, recvcount, recvbuf, rstage.get(), rbytes, *st);
  }
  return rc;
}

extern "C" int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                    int recvtag, MPI_Comm comm, MPI_Status* status) {
  const int peer = dest == MPI_PROC_NULL ? source : dest;
  auto pass = [&] { return next::Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status); };
  if (device::Carried c = carried(buf, count, type, peer)) {
    // Packed out of the device, received into a second buffer, unpacked back.
    device::Packed out, in;
    if (!device::pack_for_library(c, count, buf, out) || !device::landing_for_library(c, in)) {
      counters().add(Counter::device_passed);
      return pass();
    }
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const int bytes = static_cast<int>(c.bytes);
    int rc = next::Sendrecv(out.data, bytes, MPI_BYTE, dest, sendtag, in.storage.get(), bytes, MPI_BYTE, source,
                            recvtag, comm, st);
    if (source != MPI_PROC_NULL && has_data(rc)) rc = unpack_device(c, count, buf, in, *st, rc);
    counters().add(Counter::send_taken);
    counters().add(Counter::recv_taken);
    return rc;
  }
  auto layout = p2p_layout(buf, count, type, peer, comm);
  if (!layout) {
    counters().add(Counter::send_passed);
    return pass();
  }
  int64_t bytes = 0;
  Staging out;
  {
    ScopedTimer timer;
    out = pack_staging(*layout, count, buf, bytes);
  }
  Staging in(static_cast<size_t>(bytes));
  if (!out.get() || !in.get()) return pass();
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
