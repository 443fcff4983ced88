// SPDX-License-Identifier: BSD-3-Clause
// Linear gather to rank 0 of a communicator: used within a node, where the
// leader can take a handful of messages at once.
#include <cstring>
#include <vector>

#include "algorithms/primitives.h"

namespace veneer::algorithms {

int gather_linear(const void* input, void* buf, int64_t count, MPI_Datatype type, int64_t extent, MPI_Comm comm,
                  Tag tag) {
  int p = 1, rank = 0;
  VENEER_TRY(PMPI_Comm_size(comm, &p));
  VENEER_TRY(PMPI_Comm_rank(comm, &rank));
  if (rank != 0) return send(input, count, type, 0, tag, comm);
  std::vector<MPI_Request> requests(static_cast<size_t>(p > 1 ? p - 1 : 0), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  for (int i = 1; i < p && rc == MPI_SUCCESS; ++i)
    rc = irecv(static_cast<std::byte*>(buf) + i * count * extent, count, type, i, tag, comm,
               &requests[static_cast<size_t>(i - 1)]);
  if (rc == MPI_SUCCESS && input != buf && count > 0) {
    // Own block: a self-message keeps any type's layout right without a type description.
    rc = sendrecv(input, count, type, 0, buf, count, type, 0, tag, comm);
  }
  return wait_all(requests, rc);
}

}  // namespace veneer::algorithms
