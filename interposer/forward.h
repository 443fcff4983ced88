// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Where an intercepted call goes next: the next definition of the same MPI_*
// symbol after libveneer.so (another PMPI tool preloaded after Veneer, or the
// MPI library itself), found with dlsym(RTLD_NEXT); PMPI_* if there is none.
// This keeps tools stacked behind Veneer working.
#include <mpi.h>

#define VENEER_FORWARDED(X) \
  X(Init)                   \
  X(Init_thread)            \
  X(Finalize)               \
  X(Type_commit)            \
  X(Type_dup)               \
  X(Pack)                   \
  X(Unpack)                 \
  X(Send)                   \
  X(Ssend)                  \
  X(Rsend)                  \
  X(Isend)                  \
  X(Issend)                 \
  X(Bsend)                  \
  X(Ibsend)                 \
  X(Irsend)                 \
  X(Recv)                   \
  X(Irecv)                  \
  X(Mrecv)                  \
  X(Imrecv)                 \
  X(Sendrecv)               \
  X(Sendrecv_replace)       \
  X(Send_init)              \
  X(Ssend_init)             \
  X(Bsend_init)             \
  X(Rsend_init)             \
  X(Recv_init)              \
  X(Start)                  \
  X(Startall)               \
  X(Wait)                   \
  X(Waitall)                \
  X(Waitany)                \
  X(Waitsome)               \
  X(Test)                   \
  X(Testall)                \
  X(Testany)                \
  X(Testsome)               \
  X(Request_free)           \
  X(Cancel)                 \
  X(Request_get_status)     \
  X(Alltoallv)              \
  X(Alltoallw)              \
  X(Neighbor_alltoallv)     \
  X(Neighbor_alltoallw)     \
  X(Barrier)                \
  X(Allreduce)              \
  X(Bcast)                  \
  X(Reduce)                 \
  X(Allgather)              \
  X(Reduce_scatter)         \
  X(Reduce_scatter_block)   \
  X(Alltoall)

// The MPI-4 large-count forms Veneer takes over, where mpi.h declares them
// (VENEER_HAVE_LARGE_COUNT: MPICH 4.0, not Open MPI 4.1).
#ifdef VENEER_HAVE_LARGE_COUNT
#define VENEER_FORWARDED_LARGE(X) \
  X(Pack_c)                       \
  X(Unpack_c)                     \
  X(Send_c)                       \
  X(Isend_c)                      \
  X(Recv_c)                       \
  X(Irecv_c)                      \
  X(Sendrecv_c)                   \
  X(Ssend_c)                      \
  X(Rsend_c)                      \
  X(Bsend_c)                      \
  X(Issend_c)                     \
  X(Ibsend_c)                     \
  X(Irsend_c)                     \
  X(Send_init_c)                  \
  X(Ssend_init_c)                 \
  X(Bsend_init_c)                 \
  X(Rsend_init_c)                 \
  X(Recv_init_c)                  \
  X(Sendrecv_replace_c)           \
  X(Mrecv_c)                      \
  X(Imrecv_c)
#else
#define VENEER_FORWARDED_LARGE(X)
#endif

namespace veneer::next {
#define VENEER_DECLARE(name) extern decltype(&PMPI_##name) name;
VENEER_FORWARDED(VENEER_DECLARE)
VENEER_FORWARDED_LARGE(VENEER_DECLARE)
#undef VENEER_DECLARE
// Fills the table (idempotent; runs at load time and again at MPI_Init).
void resolve();
}  // namespace veneer::next
