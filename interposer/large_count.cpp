// SPDX-License-Identifier: BSD-3-Clause
// The MPI-4 large-count (_c) entry points Veneer takes over, built where
// mpi.h declares them (VENEER_HAVE_LARGE_COUNT: MPICH 4.0, not Open MPI 4.1).
//
// Each keeps its int form's rules. A call whose counts, sizes and positions
// fit an int goes through the int form's entry point (interposer/pack.cpp,
// interposer/p2p.cpp), so it is taken over or passed through exactly as that
// call would be. Beyond an int, MPI_Pack_c and MPI_Unpack_c keep the same
// rules with 64-bit arithmetic and Veneer's packer; the sends and receives go
// to the library (the int forms take over no message of more than INT_MAX
// bytes either). Every point-to-point _c form is here (sends of each mode,
// receives, matched receives, Sendrecv(_replace), the persistent inits); the
// other _c functions (MPI_Pack_size_c, the collectives) are not defined
// here: they reach the library untouched.
#include <mpi.h>

#ifdef VENEER_HAVE_LARGE_COUNT

#include <climits>
#include <cstdint>

#include "interposer/forward.h"
#include "interposer/pack.h"
#include "interposer/switchboard.h"
#include "support/counters.h"

using namespace veneer;

namespace {

bool fits_int(MPI_Count n) { return n >= INT_MIN && n <= INT_MAX; }

// MPI_Pack_c (`packing`) and MPI_Unpack_c in the terms both share: `count`
// instances of `type` at `user`, a packed buffer of `size` bytes at
// `*position`. `int_form(count, size, &position)` is the int entry point,
// `library()` the library's _c form with the caller's arguments.
template <bool packing, class IntForm, class Library>
int pack_c(const void* user, MPI_Count count, MPI_Datatype type, const void* packed, MPI_Count size,
           MPI_Count* position, MPI_Comm comm, IntForm int_form, Library library) {
  if (position && fits_int(count) && fits_int(size) && fits_int(*position)) {
    int at = static_cast<int>(*position);
    const int rc = int_form(static_cast<int>(count), static_cast<int>(size), &at);
    *position = at;
    return rc;
  }
  if (const int64_t n = pack_on_host(packing, user, count, type, packed, size, position ? *position : -1, comm);
      n >= 0) {
    *position += n;
    return MPI_SUCCESS;
  }
  counters().add(packing ? Counter::pack_passed : Counter::unpack_passed);
  return library();
}

}  // namespace

extern "C" int MPI_Pack_c(const void* inbuf, MPI_Count incount, MPI_Datatype type, void* outbuf, MPI_Count outsize,
                          MPI_Count* position, MPI_Comm comm) {
  return pack_c<true>(
      inbuf, incount, type, outbuf, outsize, position, comm,
      [&](int n, int size, int* at) { return MPI_Pack(inbuf, n, type, outbuf, size, at, comm); },
      [&] { return next::Pack_c(inbuf, incount, type, outbuf, outsize, position, comm); });
}

extern "C" int MPI_Unpack_c(const void* inbuf, MPI_Count insize, MPI_Count* position, void* outbuf, MPI_Count outcount,
                            MPI_Datatype type, MPI_Comm comm) {
  return pack_c<false>(
      outbuf, outcount, type, inbuf, insize, position, comm,
      [&](int n, int size, int* at) { return MPI_Unpack(inbuf, size, at, outbuf, n, type, comm); },
      [&] { return next::Unpack_c(inbuf, insize, position, outbuf, outcount, type, comm); });
}

extern "C" int MPI_Send_c(const void* buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (fits_int(count)) return MPI_Send(buf, static_cast<int>(count), type, dest, tag, comm);
  counters().add(Counter::send_passed);
  return next::Send_c(buf, count, type, dest, tag, comm);
}

extern "C" int MPI_Isend_c(const void* buf, MPI_Count count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                           MPI_Request* request) {
  if (fits_int(count)) return MPI_Isend(buf, static_cast<int>(count), type, dest, tag, comm, request);
  counters().add(Counter::send_passed);
  return next::Isend_c(buf, count, type, dest, tag, comm, request);
}

extern "C" int MPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                          MPI_Status* status) {
  if (fits_int(count)) return MPI_Recv(buf, static_cast<int>(count), type, source, tag, comm, status);
  counters().add(Counter::recv_passed);
  return next::Recv_c(buf, count, type, source, tag, comm, status);
}

extern "C" int MPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                           MPI_Request* request) {
  if (fits_int(count)) return MPI_Irecv(buf, static_cast<int>(count), type, source, tag, comm, request);
  counters().add(Counter::recv_passed);
  return next::Irecv_c(buf, count, type, source, tag, comm, request);
}

extern "C" int MPI_Sendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                              void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                              MPI_Comm comm, MPI_Status* status) {
  if (fits_int(sendcount) && fits_int(recvcount))
    return MPI_Sendrecv(sendbuf, static_cast<int>(sendcount), sendtype, dest, sendtag, recvbuf,
                        static_cast<int>(recvcount), recvtype, source, recvtag, comm, status);
  counters().add(Counter::send_passed);
  return next::Sendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status);
}

// The other sends, receives and persistent inits: the int form where the
// count fits (so a device buffer is carried as there), the library otherwise.
#define VENEER_SEND_C(Name, Counter)                                                                    \
  extern "C" int MPI_##Name##_c(const void* buf, MPI_Count count, MPI_Datatype type, int dest, int tag, \
                                MPI_Comm comm) {                                                        \
    if (fits_int(count)) return MPI_##Name(buf, static_cast<int>(count), type, dest, tag, comm);        \
    counters().add(Counter);                                                                            \
    return next::Name##_c(buf, count, type, dest, tag, comm);                                           \
  }
VENEER_SEND_C(Ssend, Counter::send_passed)
VENEER_SEND_C(Rsend, Counter::send_passed)
VENEER_SEND_C(Bsend, Counter::send_passed)
#undef VENEER_SEND_C

// `peer`: the partner's parameter name in mpi.h (dest or source).
#define VENEER_NONBLOCKING_C(Name, Buf, peer, Counter)                                                         \
  extern "C" int MPI_##Name##_c(Buf buf, MPI_Count count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, \
                                MPI_Request* request) {                                                        \
    if (fits_int(count)) return MPI_##Name(buf, static_cast<int>(count), type, peer, tag, comm, request);      \
    counters().add(Counter);                                                                                   \
    return next::Name##_c(buf, count, type, peer, tag, comm, request);                                         \
  }
VENEER_NONBLOCKING_C(Issend, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Ibsend, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Irsend, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Send_init, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Ssend_init, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Bsend_init, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Rsend_init, const void*, dest, Counter::send_passed)
VENEER_NONBLOCKING_C(Recv_init, void*, source, Counter::recv_passed)
#undef VENEER_NONBLOCKING_C

extern "C" int MPI_Sendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype type, int dest, int sendtag, int source,
                                      int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (fits_int(count))
    return MPI_Sendrecv_replace(buf, static_cast<int>(count), type, dest, sendtag, source, recvtag, comm, status);
  counters().add(Counter::send_passed);
  return next::Sendrecv_replace_c(buf, count, type, dest, sendtag, source, recvtag, comm, status);
}

extern "C" int MPI_Mrecv_c(void* buf, MPI_Count count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (fits_int(count)) return MPI_Mrecv(buf, static_cast<int>(count), type, message, status);
  counters().add(Counter::recv_passed);
  return next::Mrecv_c(buf, count, type, message, status);
}

extern "C" int MPI_Imrecv_c(void* buf, MPI_Count count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  if (fits_int(count)) return MPI_Imrecv(buf, static_cast<int>(count), type, message, request);
  counters().add(Counter::recv_passed);
  return next::Imrecv_c(buf, count, type, message, request);
}

#endif  // VENEER_HAVE_LARGE_COUNT
