// SPDX-License-Identifier: BSD-3-Clause
// Fortran entry points of every call Veneer takes over. Open MPI's Fortran
// bindings call PMPI_* directly, so without these a Fortran program would
// bypass Veneer (and Veneer's requests, started through MPICH's bindings,
// would be completed behind its back by MPICH's mpi_f08 completion calls,
// which call PMPI_Wait & co.). Each entry point converts the Fortran
// arguments as the library's own binding does (handles with MPI_*_f2c/c2f,
// the library's MPI_BOTTOM / MPI_IN_PLACE / MPI_STATUS(ES)_IGNORE sentinels,
// 1-based indices, LOGICAL flags, ierror) and calls Veneer's C MPI_* entry
// point, so the same take-over rules apply and everything else reaches the
// library unchanged.
//
// Spellings: mpif.h and `use mpi` call mpi_send_ (gfortran), mpi_send__,
// mpi_send and MPI_SEND (other name-mangling conventions); `use mpi_f08` calls
// mpi_send_f08_ on Open MPI (the same arguments as mpif.h, ierror optional).
// MPICH's mpi_f08 buffer calls (mpi_send_f08ts_, descriptors) already reach
// Veneer's C MPI_Send; its completion, init and type calls (mpi_wait_f08_ ...)
// call PMPI_* and are defined here with MPICH's mpi_f08 sentinels.
//
// Nothing here links the Fortran libraries: their sentinels are weak
// references, null in a program without Fortran, and the calls that must run
// the library's own Fortran code (MPI_INIT, MPI_FINALIZE) find it with
// dlsym(RTLD_NEXT).
#include <mpi.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "interposer/init.h"

// NOLINTNEXTLINE(misc-redundant-expression): MPI_Fint is int on both libraries, which is what this asserts
static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are passed to C as int arrays");

namespace {

using F = MPI_Fint;

// What a binding passes for the special addresses (null: none known).
struct Sentinels {
  const void* bottom = nullptr;
  const void* in_place = nullptr;
  const void* status_ignore = nullptr;
  const void* statuses_ignore = nullptr;
};

}  // namespace

#if defined(OPEN_MPI)
// Open MPI: common blocks /mpi_fortran_bottom/ ... (defined by libmpi).
extern "C" {
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_status_ignore_ __attribute__((weak));
extern int mpi_fortran_statuses_ignore_ __attribute__((weak));
}
namespace {
inline Sentinels f77() {
  return {&mpi_fortran_bottom_, &mpi_fortran_in_place_, &mpi_fortran_status_ignore_, &mpi_fortran_statuses_ignore_};
}
}  // namespace
#elif defined(MPICH)
// MPICH: libmpichfort records the addresses of its common blocks in these
// pointers at its first Fortran call (mpirinitf_); its mpi_f08 module passes
// objects libmpich defines (declared in mpi.h).
extern "C" {
extern void* MPIR_F_MPI_BOTTOM __attribute__((weak));
extern void* MPIR_F_MPI_IN_PLACE __attribute__((weak));
extern int MPIR_F_NeedInit __attribute__((weak));
void mpirinitf_() __attribute__((weak));
}
namespace {
inline Sentinels f77() {
  if (&MPIR_F_NeedInit == nullptr || &MPIR_F_MPI_BOTTOM == nullptr || &MPIR_F_MPI_IN_PLACE == nullptr)
    return {nullptr, nullptr, MPI_F_STATUS_IGNORE, MPI_F_STATUSES_IGNORE};
  if (MPIR_F_NeedInit && mpirinitf_) {  // as MPICH's own binding does
    mpirinitf_();
    MPIR_F_NeedInit = 0;
  }
  return {MPIR_F_MPI_BOTTOM, MPIR_F_MPI_IN_PLACE, MPI_F_STATUS_IGNORE, MPI_F_STATUSES_IGNORE};
}
inline Sentinels f08() { return {nullptr, nullptr, &MPIR_F08_MPI_STATUS_IGNORE_OBJ, MPIR_F08_MPI_STATUSES_IGNORE_OBJ}; }
}  // namespace
#else
#error "Veneer's Fortran entry points know Open MPI's and MPICH's bindings"
#endif

namespace {

// Fortran INTEGERs per status (MPI_STATUS_SIZE).
#ifdef MPI_F_STATUS_SIZE
constexpr int kStatusSize = MPI_F_STATUS_SIZE;
#else
constexpr int kStatusSize = static_cast<int>(sizeof(MPI_Status) / sizeof(F));
#endif

// gfortran's .TRUE. and .FALSE. (both libraries use 1 and 0 with it).
constexpr F kTrue = 1, kFalse = 0;

inline void set_error(F* ierror, int rc) {
  if (ierror) *ierror = rc;  // optional in mpi_f08
}

inline void* address(void* p, const Sentinels& s) { return s.bottom && p == s.bottom ? MPI_BOTTOM : p; }
// A collective's send buffer: MPI_IN_PLACE or MPI_BOTTOM.
inline void* send_address(void* p, const Sentinels& s) {
  return s.in_place && p == s.in_place ? MPI_IN_PLACE : address(p, s);
}

inline MPI_Comm comm(const F* f) { return PMPI_Comm_f2c(*f); }
inline MPI_Datatype type(const F* f) { return PMPI_Type_f2c(*f); }
inline MPI_Op op(const F* f) { return PMPI_Op_f2c(*f); }

// One status the call fills, or MPI_STATUS_IGNORE.
class StatusOut {
 public:
  StatusOut(F* f, const Sentinels& s) : f_(s.status_ignore && f == s.status_ignore ? nullptr : f) {}
  MPI_Status* c() { return f_ ? &c_ : MPI_STATUS_IGNORE; }
  void write() {
    if (f_) PMPI_Status_c2f(&c_, f_);
  }

 private:
  F* f_;
  MPI_Status c_{};
};

// An array of statuses the call fills, or MPI_STATUSES_IGNORE.
class StatusesOut {
 public:
  StatusesOut(F* f, int n, const Sentinels& s)
      : f_(s.statuses_ignore && f == s.statuses_ignore ? nullptr : f), c_(f_ && n > 0 ? static_cast<size_t>(n) : 0) {}
  MPI_Status* c() { return f_ ? c_.data() : MPI_STATUSES_IGNORE; }
  void write(int k) {
    if (f_) PMPI_Status_c2f(&c_[static_cast<size_t>(k)], f_ + static_cast<ptrdiff_t>(k) * kStatusSize);
  }

 private:
  F* f_;
  std::vector<MPI_Status> c_;
};

// An array of requests, converted in and written back.
class Requests {
 public:
  Requests(F* f, int n) : f_(f), c_(n > 0 ? static_cast<size_t>(n) : 0) {
    for (size_t i = 0; i < c_.size(); ++i) c_[i] = PMPI_Request_f2c(f_[i]);
  }
  MPI_Request* c() { return c_.data(); }
  void write() {
    for (size_t i = 0; i < c_.size(); ++i) f_[i] = PMPI_Request_c2f(c_[i]);
  }

 private:
  F* f_;
  std::vector<MPI_Request> c_;
};

// Datatype handles of an Alltoallw.
std::vector<MPI_Datatype> types(const F* f, int n) {
  std::vector<MPI_Datatype> c(n > 0 ? static_cast<size_t>(n) : 0);
  for (size_t i = 0; i < c.size(); ++i) c[i] = PMPI_Type_f2c(f[i]);
  return c;
}

// The completion calls, for a binding's sentinels.
template <Sentinels (*S)()>
void wait(F* request, F* status, F* ierror) {
  StatusOut st(status, S());
  MPI_Request r = PMPI_Request_f2c(*request);
  const int rc = MPI_Wait(&r, st.c());
  *request = PMPI_Request_c2f(r);
  st.write();
  set_error(ierror, rc);
}

template <Sentinels (*S)()>
void test(F* request, F* flag, F* status, F* ierror) {
  StatusOut st(status, S());
  MPI_Request r = PMPI_Request_f2c(*request);
  int c_flag = 0;
  const int rc = MPI_Test(&r, &c_flag, st.c());
  *request = PMPI_Request_c2f(r);
  *flag = c_flag ? kTrue : kFalse;
  if (c_flag) st.write();
  set_error(ierror, rc);
}

template <Sentinels (*S)()>
void waitall(F* count, F* requests, F* statuses, F* ierror) {
  Requests reqs(requests, *count);
  StatusesOut st(statuses, *count, S());
  const int rc = MPI_Waitall(*count, reqs.c(), st.c());
  reqs.write();
  for (int i = 0; i < *count; ++i) st.write(i);
  set_error(ierror, rc);
}

template <Sentinels (*S)()>
void testall(F* count, F* requests, F* flag, F* statuses, F* ierror) {
  Requests reqs(requests, *count);
  StatusesOut st(statuses, *count, S());
  int c_flag = 0;
  const int rc = MPI_Testall(*count, reqs.c(), &c_flag, st.c());
  reqs.write();
  *flag = c_flag ? kTrue : kFalse;
  if (c_flag)
    for (int i = 0; i < *count; ++i) st.write(i);
  set_error(ierror, rc);
}

inline F fortran_index(int c_index) { return c_index == MPI_UNDEFINED ? MPI_UNDEFINED : c_index + 1; }

template <Sentinels (*S)()>
void waitany(F* count, F* requests, F* index, F* status, F* ierror) {
  Requests reqs(requests, *count);
  StatusOut st(status, S());
  int c_index = MPI_UNDEFINED;
  const int rc = MPI_Waitany(*count, reqs.c(), &c_index, st.c());
  reqs.write();
  *index = fortran_index(c_index);
  st.write();
  set_error(ierror, rc);
}

template <Sentinels (*S)()>
void testany(F* count, F* requests, F* index, F* flag, F* status, F* ierror) {
  Requests reqs(requests, *count);
  StatusOut st(status, S());
  int c_index = MPI_UNDEFINED, c_flag = 0;
  const int rc = MPI_Testany(*count, reqs.c(), &c_index, &c_flag, st.c());
  reqs.write();
  *index = fortran_index(c_index);
  *flag = c_flag ? kTrue : kFalse;
  if (c_flag) st.write();
  set_error(ierror, rc);
}

template <Sentinels (*S)(), int (*Call)(int, MPI_Request[], int*, int[], MPI_Status[])>
void some(F* incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror) {
  Requests reqs(requests, *incount);
  StatusesOut st(statuses, *incount, S());
  const int rc = Call(*incount, reqs.c(), outcount, indices, st.c());
  reqs.write();
  if (*outcount != MPI_UNDEFINED)
    for (int k = 0; k < *outcount; ++k) {
      st.write(k);
      indices[k] += 1;
    }
  set_error(ierror, rc);
}

template <Sentinels (*S)()>
void request_get_status(F* request, F* flag, F* status, F* ierror) {
  StatusOut st(status, S());
  int c_flag = 0;
  const int rc = MPI_Request_get_status(PMPI_Request_f2c(*request), &c_flag, st.c());
  *flag = c_flag ? kTrue : kFalse;
  if (c_flag) st.write();
  set_error(ierror, rc);
}

void request_free(F* request, F* ierror) {
  MPI_Request r = PMPI_Request_f2c(*request);
  const int rc = MPI_Request_free(&r);
  *request = PMPI_Request_c2f(r);
  set_error(ierror, rc);
}

void cancel(F* request, F* ierror) {
  MPI_Request r = PMPI_Request_f2c(*request);
  set_error(ierror, MPI_Cancel(&r));
}

void type_commit(F* datatype, F* ierror) {
  MPI_Datatype t = PMPI_Type_f2c(*datatype);
  const int rc = MPI_Type_commit(&t);
  if (rc == MPI_SUCCESS) *datatype = PMPI_Type_c2f(t);
  set_error(ierror, rc);
}

void type_dup(F* oldtype, F* newtype, F* ierror) {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  const int rc = MPI_Type_dup(PMPI_Type_f2c(*oldtype), &t);
  if (rc == MPI_SUCCESS) *newtype = PMPI_Type_c2f(t);
  set_error(ierror, rc);
}

// MPI_INIT and MPI_FINALIZE run the library's own Fortran routine (it may set
// up the binding's sentinels), found as the next definition of the same name.
using InitFn = void (*)(F*);
using InitThreadFn = void (*)(F*, F*, F*);

void* next_fortran(const char* name) { return dlsym(RTLD_NEXT, name); }

void init(InitFn next, F* ierror) {
  F rc = MPI_SUCCESS;
  if (next) next(&rc);
  else rc = MPI_Init(nullptr, nullptr);  // no Fortran library behind us: the C call
  if (rc == MPI_SUCCESS) veneer::after_init();
  set_error(ierror, rc);
}

void init_thread(InitThreadFn next, F* required, F* provided, F* ierror) {
  F rc = MPI_SUCCESS;
  if (next) next(required, provided, &rc);
  else rc = MPI_Init_thread(nullptr, nullptr, *required, provided);
  if (rc == MPI_SUCCESS) veneer::after_init();
  set_error(ierror, rc);
}

void finalize(InitFn next, F* ierror) {
  veneer::before_finalize();
  F rc = MPI_SUCCESS;
  if (next) next(&rc);
  else rc = MPI_Finalize();
  set_error(ierror, rc);
}

}  // namespace

// ---- The implementations, one per call (the mpif.h / `use mpi` arguments) ----
extern "C" {

void veneer_fortran_pack(void* inbuf, F* incount, F* datatype, void* outbuf, F* outsize, F* position, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Pack(address(inbuf, s), *incount, type(datatype), outbuf, *outsize, position, comm(c)));
}

void veneer_fortran_unpack(void* inbuf, F* insize, F* position, void* outbuf, F* outcount, F* datatype, F* c,
                           F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Unpack(inbuf, *insize, position, address(outbuf, s), *outcount, type(datatype), comm(c)));
}

#define VENEER_FORTRAN_BLOCKING_SEND(lower, Call)                                                   \
  void veneer_fortran_##lower(void* buf, F* count, F* datatype, F* dest, F* tag, F* c, F* ierror) { \
    set_error(ierror, Call(address(buf, f77()), *count, type(datatype), *dest, *tag, comm(c)));     \
  }
VENEER_FORTRAN_BLOCKING_SEND(send, MPI_Send)
VENEER_FORTRAN_BLOCKING_SEND(ssend, MPI_Ssend)
VENEER_FORTRAN_BLOCKING_SEND(rsend, MPI_Rsend)
VENEER_FORTRAN_BLOCKING_SEND(bsend, MPI_Bsend)
#undef VENEER_FORTRAN_BLOCKING_SEND

#define VENEER_FORTRAN_NONBLOCKING(lower, Call)                                                                 \
  void veneer_fortran_##lower(void* buf, F* count, F* datatype, F* peer, F* tag, F* c, F* request, F* ierror) { \
    MPI_Request r = MPI_REQUEST_NULL;                                                                           \
    const int rc = Call(address(buf, f77()), *count, type(datatype), *peer, *tag, comm(c), &r);                 \
    if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);                                                      \
    set_error(ierror, rc);                                                                                      \
  }
VENEER_FORTRAN_NONBLOCKING(isend, MPI_Isend)
VENEER_FORTRAN_NONBLOCKING(issend, MPI_Issend)
VENEER_FORTRAN_NONBLOCKING(irecv, MPI_Irecv)
VENEER_FORTRAN_NONBLOCKING(ibsend, MPI_Ibsend)
VENEER_FORTRAN_NONBLOCKING(irsend, MPI_Irsend)
VENEER_FORTRAN_NONBLOCKING(send_init, MPI_Send_init)
VENEER_FORTRAN_NONBLOCKING(ssend_init, MPI_Ssend_init)
VENEER_FORTRAN_NONBLOCKING(bsend_init, MPI_Bsend_init)
VENEER_FORTRAN_NONBLOCKING(rsend_init, MPI_Rsend_init)
VENEER_FORTRAN_NONBLOCKING(recv_init, MPI_Recv_init)
#undef VENEER_FORTRAN_NONBLOCKING

// A started persistent request keeps its handle: nothing to write back.
void veneer_fortran_start(F* request, F* ierror) {
  MPI_Request r = PMPI_Request_f2c(*request);
  set_error(ierror, MPI_Start(&r));
}
void veneer_fortran_startall(F* count, F* requests, F* ierror) {
  std::vector<MPI_Request> r(static_cast<size_t>(std::max(*count, 0)));
  for (size_t i = 0; i < r.size(); ++i) r[i] = PMPI_Request_f2c(requests[i]);
  set_error(ierror, MPI_Startall(*count, r.data()));
}

void veneer_fortran_recv(void* buf, F* count, F* datatype, F* source, F* tag, F* c, F* status, F* ierror) {
  const Sentinels s = f77();
  StatusOut st(status, s);
  const int rc = MPI_Recv(address(buf, s), *count, type(datatype), *source, *tag, comm(c), st.c());
  st.write();
  set_error(ierror, rc);
}

void veneer_fortran_sendrecv(void* sendbuf, F* sendcount, F* sendtype, F* dest, F* sendtag, void* recvbuf, F* recvcount,
                             F* recvtype, F* source, F* recvtag, F* c, F* status, F* ierror) {
  const Sentinels s = f77();
  StatusOut st(status, s);
  const int rc = MPI_Sendrecv(address(sendbuf, s), *sendcount, type(sendtype), *dest, *sendtag, address(recvbuf, s),
                              *recvcount, type(recvtype), *source, *recvtag, comm(c), st.c());
  st.write();
  set_error(ierror, rc);
}

void veneer_fortran_sendrecv_replace(void* buf, F* count, F* datatype, F* dest, F* sendtag, F* source, F* recvtag, F* c,
                                     F* status, F* ierror) {
  const Sentinels s = f77();
  StatusOut st(status, s);
  const int rc = MPI_Sendrecv_replace(address(buf, s), *count, type(datatype), *dest, *sendtag, *source, *recvtag,
                                      comm(c), st.c());
  st.write();
  set_error(ierror, rc);
}

void veneer_fortran_alltoallv(void* sendbuf, F* sendcounts, F* sdispls, F* sendtype, void* recvbuf, F* recvcounts,
                              F* rdispls, F* recvtype, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Alltoallv(send_address(sendbuf, s), sendcounts, sdispls, type(sendtype), address(recvbuf, s),
                                  recvcounts, rdispls, type(recvtype), comm(c)));
}

void veneer_fortran_neighbor_alltoallv(void* sendbuf, F* sendcounts, F* sdispls, F* sendtype, void* recvbuf,
                                       F* recvcounts, F* rdispls, F* recvtype, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Neighbor_alltoallv(address(sendbuf, s), sendcounts, sdispls, type(sendtype),
                                           address(recvbuf, s), recvcounts, rdispls, type(recvtype), comm(c)));
}

void veneer_fortran_alltoallw(void* sendbuf, F* sendcounts, F* sdispls, F* sendtypes, void* recvbuf, F* recvcounts,
                              F* rdispls, F* recvtypes, F* c, F* ierror) {
  const Sentinels s = f77();
  const MPI_Comm cc = comm(c);
  int n = 0, inter = 0;
  // A communicator the library will not describe: no types converted, and
  // the call below returns the library's own error.
  if (cc != MPI_COMM_NULL && (PMPI_Comm_test_inter(cc, &inter) != MPI_SUCCESS ||
                              (inter ? PMPI_Comm_remote_size(cc, &n) : PMPI_Comm_size(cc, &n)) != MPI_SUCCESS))
    n = 0;
  void* sbuf = send_address(sendbuf, s);
  const auto rtypes = types(recvtypes, n);
  // In place the send arguments are ignored (and may be anything).
  const auto stypes = sbuf == MPI_IN_PLACE ? rtypes : types(sendtypes, n);
  set_error(ierror, MPI_Alltoallw(sbuf, sendcounts, sdispls, stypes.data(), address(recvbuf, s), recvcounts, rdispls,
                                  rtypes.data(), cc));
}

void veneer_fortran_neighbor_alltoallw(void* sendbuf, F* sendcounts, MPI_Aint* sdispls, F* sendtypes, void* recvbuf,
                                       F* recvcounts, MPI_Aint* rdispls, F* recvtypes, F* c, F* ierror) {
  const Sentinels s = f77();
  const MPI_Comm cc = comm(c);
  int topo = MPI_UNDEFINED, in = 0, out = 0;
  if (cc != MPI_COMM_NULL && PMPI_Topo_test(cc, &topo) != MPI_SUCCESS) topo = MPI_UNDEFINED;
  // A failed query leaves no types converted; the call below returns the library's own error.
  bool ok = true;
  if (topo == MPI_CART) {
    int dims = 0;
    ok = PMPI_Cartdim_get(cc, &dims) == MPI_SUCCESS;
    in = out = 2 * dims;
  } else if (topo == MPI_GRAPH) {
    int rank = 0;
    ok = PMPI_Comm_rank(cc, &rank) == MPI_SUCCESS && PMPI_Graph_neighbors_count(cc, rank, &in) == MPI_SUCCESS;
    out = in;
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    ok = PMPI_Dist_graph_neighbors_count(cc, &in, &out, &weighted) == MPI_SUCCESS;
  }
  if (!ok) in = out = 0;
  const auto stypes = types(sendtypes, out);
  const auto rtypes = types(recvtypes, in);
  set_error(ierror, MPI_Neighbor_alltoallw(address(sendbuf, s), sendcounts, sdispls, stypes.data(), address(recvbuf, s),
                                           recvcounts, rdispls, rtypes.data(), cc));
}

void veneer_fortran_barrier(F* c, F* ierror) { set_error(ierror, MPI_Barrier(comm(c))); }

void veneer_fortran_allreduce(void* sendbuf, void* recvbuf, F* count, F* datatype, F* o, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror,
            MPI_Allreduce(send_address(sendbuf, s), address(recvbuf, s), *count, type(datatype), op(o), comm(c)));
}

void veneer_fortran_bcast(void* buf, F* count, F* datatype, F* root, F* c, F* ierror) {
  set_error(ierror, MPI_Bcast(address(buf, f77()), *count, type(datatype), *root, comm(c)));
}

void veneer_fortran_reduce(void* sendbuf, void* recvbuf, F* count, F* datatype, F* o, F* root, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror,
            MPI_Reduce(send_address(sendbuf, s), address(recvbuf, s), *count, type(datatype), op(o), *root, comm(c)));
}

void veneer_fortran_allgather(void* sendbuf, F* sendcount, F* sendtype, void* recvbuf, F* recvcount, F* recvtype, F* c,
                              F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Allgather(send_address(sendbuf, s), *sendcount, type(sendtype), address(recvbuf, s), *recvcount,
                                  type(recvtype), comm(c)));
}

void veneer_fortran_reduce_scatter(void* sendbuf, void* recvbuf, F* recvcounts, F* datatype, F* o, F* c, F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Reduce_scatter(send_address(sendbuf, s), address(recvbuf, s), recvcounts, type(datatype), op(o),
                                       comm(c)));
}

void veneer_fortran_reduce_scatter_block(void* sendbuf, void* recvbuf, F* recvcount, F* datatype, F* o, F* c,
                                         F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Reduce_scatter_block(send_address(sendbuf, s), address(recvbuf, s), *recvcount, type(datatype),
                                             op(o), comm(c)));
}

void veneer_fortran_alltoall(void* sendbuf, F* sendcount, F* sendtype, void* recvbuf, F* recvcount, F* recvtype, F* c,
                             F* ierror) {
  const Sentinels s = f77();
  set_error(ierror, MPI_Alltoall(send_address(sendbuf, s), *sendcount, type(sendtype), address(recvbuf, s), *recvcount,
                                 type(recvtype), comm(c)));
}

// The completion calls, once for each set of sentinels (`prefix`: the
// function names' start; `S`: f77 or f08).
#define VENEER_COMPLETION_CALLS(prefix, S)                                                                  \
  void prefix##_wait(F* request, F* status, F* ierror) { wait<S>(request, status, ierror); }                \
  void prefix##_test(F* request, F* flag, F* status, F* ierror) { test<S>(request, flag, status, ierror); } \
  void prefix##_waitall(F* count, F* requests, F* statuses, F* ierror) {                                    \
    waitall<S>(count, requests, statuses, ierror);                                                          \
  }                                                                                                         \
  void prefix##_testall(F* count, F* requests, F* flag, F* statuses, F* ierror) {                           \
    testall<S>(count, requests, flag, statuses, ierror);                                                    \
  }                                                                                                         \
  void prefix##_waitany(F* count, F* requests, F* index, F* status, F* ierror) {                            \
    waitany<S>(count, requests, index, status, ierror);                                                     \
  }                                                                                                         \
  void prefix##_testany(F* count, F* requests, F* index, F* flag, F* status, F* ierror) {                   \
    testany<S>(count, requests, index, flag, status, ierror);                                               \
  }                                                                                                         \
  void prefix##_waitsome(F* incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror) {        \
    some<S, MPI_Waitsome>(incount, requests, outcount, indices, statuses, ierror);                          \
  }                                                                                                         \
  void prefix##_testsome(F* incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror) {        \
    some<S, MPI_Testsome>(incount, requests, outcount, indices, statuses, ierror);                          \
  }                                                                                                         \
  void prefix##_request_get_status(F* request, F* flag, F* status, F* ierror) {                             \
    request_get_status<S>(request, flag, status, ierror);                                                   \
  }

VENEER_COMPLETION_CALLS(veneer_fortran, f77)
void veneer_fortran_request_free(F* request, F* ierror) { request_free(request, ierror); }
void veneer_fortran_cancel(F* request, F* ierror) { cancel(request, ierror); }
void veneer_fortran_type_commit(F* datatype, F* ierror) { type_commit(datatype, ierror); }
void veneer_fortran_type_dup(F* oldtype, F* newtype, F* ierror) { type_dup(oldtype, newtype, ierror); }

#ifdef MPICH
// MPICH's mpi_f08 completion calls: the same arguments, mpi_f08's sentinels.
VENEER_COMPLETION_CALLS(veneer_fortran08, f08)
#endif
#undef VENEER_COMPLETION_CALLS

}  // extern "C"

// ---- The symbol names ----
#define VENEER_ALIAS(impl, name) extern "C" decltype(impl) name __attribute__((alias(#impl)));
// mpif.h and `use mpi`, every name-mangling convention.
#define VENEER_F77_NAMES(impl, lower, UPPER) \
  VENEER_ALIAS(impl, lower##_) VENEER_ALIAS(impl, lower##__) VENEER_ALIAS(impl, lower) VENEER_ALIAS(impl, UPPER)
#ifdef OPEN_MPI
// Open MPI's mpi_f08 passes the same arguments (handles are one INTEGER, the
// same status layout and sentinels), with ierror optional.
#define VENEER_FORTRAN_NAMES(impl, lower, UPPER) VENEER_F77_NAMES(impl, lower, UPPER) VENEER_ALIAS(impl, lower##_f08_)
#define VENEER_FORTRAN_NAMES_BUFFER(impl, lower, UPPER) VENEER_FORTRAN_NAMES(impl, lower, UPPER)
#else
// MPICH's mpi_f08: handles are one INTEGER and its status is C's; the buffer
// calls (_f08ts_) already reach Veneer's C entry points.
#define VENEER_FORTRAN_NAMES(impl, lower, UPPER) VENEER_F77_NAMES(impl, lower, UPPER) VENEER_ALIAS(impl, lower##_f08_)
#define VENEER_FORTRAN_NAMES_BUFFER(impl, lower, UPPER) VENEER_F77_NAMES(impl, lower, UPPER)
#endif

VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_pack, mpi_pack, MPI_PACK)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_unpack, mpi_unpack, MPI_UNPACK)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_send, mpi_send, MPI_SEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_ssend, mpi_ssend, MPI_SSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_rsend, mpi_rsend, MPI_RSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_isend, mpi_isend, MPI_ISEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_issend, mpi_issend, MPI_ISSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_recv, mpi_recv, MPI_RECV)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_irecv, mpi_irecv, MPI_IRECV)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_sendrecv, mpi_sendrecv, MPI_SENDRECV)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_sendrecv_replace, mpi_sendrecv_replace, MPI_SENDRECV_REPLACE)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_alltoallv, mpi_alltoallv, MPI_ALLTOALLV)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_alltoallw, mpi_alltoallw, MPI_ALLTOALLW)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_neighbor_alltoallv, mpi_neighbor_alltoallv, MPI_NEIGHBOR_ALLTOALLV)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_neighbor_alltoallw, mpi_neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_allreduce, mpi_allreduce, MPI_ALLREDUCE)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_bcast, mpi_bcast, MPI_BCAST)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_reduce, mpi_reduce, MPI_REDUCE)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_allgather, mpi_allgather, MPI_ALLGATHER)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_reduce_scatter, mpi_reduce_scatter, MPI_REDUCE_SCATTER)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_reduce_scatter_block, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_alltoall, mpi_alltoall, MPI_ALLTOALL)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_bsend, mpi_bsend, MPI_BSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_ibsend, mpi_ibsend, MPI_IBSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_irsend, mpi_irsend, MPI_IRSEND)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_send_init, mpi_send_init, MPI_SEND_INIT)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_ssend_init, mpi_ssend_init, MPI_SSEND_INIT)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_bsend_init, mpi_bsend_init, MPI_BSEND_INIT)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_rsend_init, mpi_rsend_init, MPI_RSEND_INIT)
VENEER_FORTRAN_NAMES_BUFFER(veneer_fortran_recv_init, mpi_recv_init, MPI_RECV_INIT)
// Handles only: the same function serves mpi_f08 where the sentinels agree.
VENEER_FORTRAN_NAMES(veneer_fortran_barrier, mpi_barrier, MPI_BARRIER)
VENEER_FORTRAN_NAMES(veneer_fortran_start, mpi_start, MPI_START)
VENEER_FORTRAN_NAMES(veneer_fortran_startall, mpi_startall, MPI_STARTALL)
VENEER_FORTRAN_NAMES(veneer_fortran_request_free, mpi_request_free, MPI_REQUEST_FREE)
VENEER_FORTRAN_NAMES(veneer_fortran_cancel, mpi_cancel, MPI_CANCEL)
VENEER_FORTRAN_NAMES(veneer_fortran_type_commit, mpi_type_commit, MPI_TYPE_COMMIT)
VENEER_FORTRAN_NAMES(veneer_fortran_type_dup, mpi_type_dup, MPI_TYPE_DUP)
#ifdef OPEN_MPI
#define VENEER_COMPLETION_NAMES(lower, UPPER) VENEER_FORTRAN_NAMES(veneer_fortran_##lower, mpi_##lower, UPPER)
#else
#define VENEER_COMPLETION_NAMES(lower, UPPER)                  \
  VENEER_F77_NAMES(veneer_fortran_##lower, mpi_##lower, UPPER) \
  VENEER_ALIAS(veneer_fortran08_##lower, mpi_##lower##_f08_)
#endif
VENEER_COMPLETION_NAMES(wait, MPI_WAIT)
VENEER_COMPLETION_NAMES(test, MPI_TEST)
VENEER_COMPLETION_NAMES(waitall, MPI_WAITALL)
VENEER_COMPLETION_NAMES(testall, MPI_TESTALL)
VENEER_COMPLETION_NAMES(waitany, MPI_WAITANY)
VENEER_COMPLETION_NAMES(testany, MPI_TESTANY)
VENEER_COMPLETION_NAMES(waitsome, MPI_WAITSOME)
VENEER_COMPLETION_NAMES(testsome, MPI_TESTSOME)
VENEER_COMPLETION_NAMES(request_get_status, MPI_REQUEST_GET_STATUS)

// MPI_INIT, MPI_INIT_THREAD, MPI_FINALIZE: each spelling runs the library's
// routine of the same name, then starts (or first stops) Veneer.
#define VENEER_FORTRAN_INIT(sym)                                           \
  extern "C" void sym(F* ierror) {                                         \
    static const auto next = reinterpret_cast<InitFn>(next_fortran(#sym)); \
    init(next, ierror);                                                    \
  }
#define VENEER_FORTRAN_INIT_THREAD(sym)                                          \
  extern "C" void sym(F* required, F* provided, F* ierror) {                     \
    static const auto next = reinterpret_cast<InitThreadFn>(next_fortran(#sym)); \
    init_thread(next, required, provided, ierror);                               \
  }
#define VENEER_FORTRAN_FINALIZE(sym)                                       \
  extern "C" void sym(F* ierror) {                                         \
    static const auto next = reinterpret_cast<InitFn>(next_fortran(#sym)); \
    finalize(next, ierror);                                                \
  }
VENEER_FORTRAN_INIT(mpi_init_)
VENEER_FORTRAN_INIT(mpi_init__)
VENEER_FORTRAN_INIT(mpi_init)
VENEER_FORTRAN_INIT(MPI_INIT)
VENEER_FORTRAN_INIT(mpi_init_f08_)
VENEER_FORTRAN_INIT_THREAD(mpi_init_thread_)
VENEER_FORTRAN_INIT_THREAD(mpi_init_thread__)
VENEER_FORTRAN_INIT_THREAD(mpi_init_thread)
VENEER_FORTRAN_INIT_THREAD(MPI_INIT_THREAD)
VENEER_FORTRAN_INIT_THREAD(mpi_init_thread_f08_)
VENEER_FORTRAN_FINALIZE(mpi_finalize_)
VENEER_FORTRAN_FINALIZE(mpi_finalize__)
VENEER_FORTRAN_FINALIZE(mpi_finalize)
VENEER_FORTRAN_FINALIZE(MPI_FINALIZE)
VENEER_FORTRAN_FINALIZE(mpi_finalize_f08_)
