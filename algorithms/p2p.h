// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Point-to-point steps of the algorithms, through PMPI only (so Veneer's own
// MPI_* entry points are never re-entered), on Veneer's private communicators.
#include <mpi.h>

#include <cstdint>
#include <vector>

namespace veneer::algorithms {

// One tag per collective: a communicator carries one collective at a time, and
// between two ranks messages match in the order both sides post them.
enum class Tag : int {
  allreduce = 7301,
  bcast,
  reduce,
  allgather,
  reduce_scatter,
  alltoall,
};

inline int send(const void* buf, int64_t count, MPI_Datatype type, int dest, Tag tag, MPI_Comm comm) {
  return PMPI_Send(buf, static_cast<int>(count), type, dest, static_cast<int>(tag), comm);
}

inline int recv(void* buf, int64_t count, MPI_Datatype type, int source, Tag tag, MPI_Comm comm) {
  return PMPI_Recv(buf, static_cast<int>(count), type, source, static_cast<int>(tag), comm, MPI_STATUS_IGNORE);
}

inline int sendrecv(const void* sbuf, int64_t scount, MPI_Datatype stype, int dest, void* rbuf, int64_t rcount,
                    MPI_Datatype rtype, int source, Tag tag, MPI_Comm comm) {
  return PMPI_Sendrecv(sbuf, static_cast<int>(scount), stype, dest, static_cast<int>(tag), rbuf,
                       static_cast<int>(rcount), rtype, source, static_cast<int>(tag), comm, MPI_STATUS_IGNORE);
}

inline int isend(const void* buf, int64_t count, MPI_Datatype type, int dest, Tag tag, MPI_Comm comm,
                 MPI_Request* req) {
  return PMPI_Isend(buf, static_cast<int>(count), type, dest, static_cast<int>(tag), comm, req);
}

inline int irecv(void* buf, int64_t count, MPI_Datatype type, int source, Tag tag, MPI_Comm comm, MPI_Request* req) {
  return PMPI_Irecv(buf, static_cast<int>(count), type, source, static_cast<int>(tag), comm, req);
}

// Completes every posted request (those left MPI_REQUEST_NULL are skipped)
// and returns the first error: `posting`, from posting them, or the wait's.
// A failed post must not return while others are in flight on its buffers.
inline int wait_all(std::vector<MPI_Request>& requests, int posting) {
  const int rc = PMPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  return posting != MPI_SUCCESS ? posting : rc;
}

// Chains MPI return codes: the first error wins.
#define VENEER_TRY(expr)                              \
  do {                                                \
    int veneer_rc_ = (expr);                          \
    if (veneer_rc_ != MPI_SUCCESS) return veneer_rc_; \
  } while (0)

}  // namespace veneer::algorithms
