// SPDX-License-Identifier: BSD-3-Clause
// The differential test's message checks (differential.h): typed sends and
// receives through Veneer against the library's own.
#include <algorithm>
#include <cstring>

#include "test/datatypes/differential.h"

namespace veneer::test::differential {

// Sends and receives through Veneer between rank `sender` and `receiver`
// (the same rank: a message to self). A typed send must deliver the type's
// packing; a typed receive of a byte message must leave memory and status as
// the library's own receive of the same message does.
void Checker::messages(std::mt19937_64& rng, int sender, int receiver, int rank, int tag) {
  if (rank != sender && rank != receiver) return;
  ++tally_.messages;
  const bool self = sender == receiver;
  const bool use_isend = rng() % 2, use_irecv = rng() % 2;

  // Typed send, byte receive.
  const std::optional<std::vector<unsigned char>> library = library_pack();
  s_.memory.fill(kData);
  const std::vector<unsigned char> reference = reference_pack(s_);
  MPI_Request send_request = MPI_REQUEST_NULL;
  if (rank == sender) {
    int rc = MPI_SUCCESS;
    if (self || use_isend) rc = MPI_Isend(s_.buf, s_.count, s_.type, receiver, tag, comm_, &send_request);
    else rc = MPI_Send(s_.buf, s_.count, s_.type, receiver, tag, comm_);
    same_int(error_class(rc), MPI_SUCCESS, "typed send return code");
    if (!self && send_request != MPI_REQUEST_NULL)
      same_int(error_class(MPI_Wait(&send_request, MPI_STATUS_IGNORE)), MPI_SUCCESS, "typed Isend wait");
  }
  if (rank == receiver) {
    std::vector<unsigned char> got(s_.stream + kGuard);
    fill_pattern(got, kOutBackground);
    std::vector<unsigned char> expected = got, library_expected = got;
    std::copy(reference.begin(), reference.end(), expected.begin());
    if (library) std::copy(library->begin(), library->end(), library_expected.begin());
    MPI_Status status;
    int rc = MPI_Recv(got.data(), static_cast<int>(got.size()), MPI_BYTE, sender, tag, comm_, &status);
    same_int(error_class(rc), MPI_SUCCESS, "byte receive of a typed send: return code");
    int bytes = -1;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    same_int(bytes, s_.stream, "byte receive of a typed send: bytes received");
    Bytes l(library_expected);
    vote(got, library ? &l : nullptr, expected,
         std::string("byte receive of a typed ") + (use_isend || self ? "MPI_Isend" : "MPI_Send"), false);
  }
  if (self) same_int(error_class(MPI_Wait(&send_request, MPI_STATUS_IGNORE)), MPI_SUCCESS, "typed Isend wait");

  if (s_.overlapping) return;

  // Byte send, typed receive: Veneer's receive and the library's, of the
  // same bytes. Mostly the whole stream, sometimes whole instances, sometimes
  // any prefix.
  int64_t length = s_.stream;
  uint64_t r = rng() % 20;
  if (r < 3 && s_.count > 1) length = static_cast<int64_t>(rng() % s_.count) * s_.shape.size;
  if (r >= 17 && s_.shape.size > 0) {
    // Any prefix that ends between basic elements (a message ending inside
    // one is erroneous, and MPICH aborts on it).
    int64_t instances = static_cast<int64_t>(rng() % s_.count);
    size_t element = rng() % (s_.element_ends.size() + 1);
    length = instances * s_.shape.size + (element ? s_.element_ends[element - 1] : 0);
  }
  std::vector<unsigned char> bytes(length);
  fill_pattern(bytes, kStream);
  MPI_Request byte_requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (rank == sender) {
    for (int k = 0; k < 2; ++k) {
      int rc = self ? MPI_Isend(bytes.data(), static_cast<int>(length), MPI_BYTE, receiver, tag + 1 + k, comm_,
                                &byte_requests[k])
                    : MPI_Send(bytes.data(), static_cast<int>(length), MPI_BYTE, receiver, tag + 1 + k, comm_);
      same_int(error_class(rc), MPI_SUCCESS, "byte send return code");
    }
  }
  if (rank == receiver) {
    std::string what = " (" + std::to_string(length) + " bytes into " + std::to_string(s_.count) +
                       (use_irecv ? " instances, MPI_Irecv)" : " instances, MPI_Recv)");
    s_.memory.fill(kBackground);
    reference_unpack(s_, bytes.data(), length);
    const std::vector<unsigned char> expected = s_.memory.snapshot();
    MPI_Status status_v, status_l;
    s_.memory.fill(kBackground);
    int rc_v = MPI_SUCCESS;
    if (use_irecv) {
      MPI_Request request = MPI_REQUEST_NULL;
      rc_v = MPI_Irecv(s_.buf, s_.count, s_.type, sender, tag + 1, comm_, &request);
      if (rc_v == MPI_SUCCESS) rc_v = MPI_Wait(&request, &status_v);
    } else {
      rc_v = MPI_Recv(s_.buf, s_.count, s_.type, sender, tag + 1, comm_, &status_v);
    }
    const std::vector<unsigned char> veneer = s_.memory.snapshot();
    s_.memory.fill(kBackground);
    int rc_l = PMPI_Recv(s_.buf, s_.count, s_.type, sender, tag + 2, comm_, &status_l);
    const std::vector<unsigned char> library_memory = s_.memory.snapshot();
    int count_v = -7;
    MPI_Get_count(&status_v, s_.type, &count_v);
    if (kMpich && error_class(rc_l) == MPI_ERR_TRUNCATE && length <= s_.stream) {
      // MPICH's false "message truncated" (structs with gaps, > 8 KiB): no
      // library answer. A Veneer that passes this type on to the library
      // fails alike; one that takes it over must receive it all.
      ++tally_.mpich_skips;
      if (error_class(rc_v) == MPI_ERR_TRUNCATE) {
        ++tally_.mpich_truncations_passed_on;
        note(tally_.mpich_truncation_examples, who());
      } else {
        same_int(error_class(rc_v), MPI_SUCCESS, "typed receive return code" + what);
        vote(veneer, nullptr, expected, "typed receive memory" + what, true);
        int64_t count = s_.shape.size == 0 ? 0 : length % s_.shape.size ? MPI_UNDEFINED : length / s_.shape.size;
        same_int(count_v, count, "MPI_Get_count (against the reference)" + what);
      }
    } else {
      same_int(error_class(rc_v), error_class(rc_l), "typed receive return code" + what);
      Bytes l(library_memory);
      vote(veneer, &l, expected, "typed receive memory" + what, true);
      same_int(status_v.MPI_SOURCE, status_l.MPI_SOURCE, "typed receive status source" + what);
      same_int(status_v.MPI_TAG + 1, status_l.MPI_TAG, "typed receive status tag (+1)" + what);
      int count_l = -7, elements_v = -7, elements_l = -7;
      MPI_Count elements_x_v = -7, elements_x_l = -7;
      PMPI_Get_count(&status_l, s_.type, &count_l);
      same_int(count_v, count_l, "MPI_Get_count" + what);
      // MPICH 4.0's MPI_Get_elements divides by zero on pair types
      // (MPI_FLOAT_INT...) and on some structs (of contiguous(7,
      // MPI_UNSIGNED_CHAR) and MPI_CHAR, say): no library answer there.
      if (kMpich) {
        ++tally_.mpich_skips;
      } else {
        MPI_Get_elements(&status_v, s_.type, &elements_v);
        PMPI_Get_elements(&status_l, s_.type, &elements_l);
        same_int(elements_v, elements_l, "MPI_Get_elements" + what);
        MPI_Get_elements_x(&status_v, s_.type, &elements_x_v);
        PMPI_Get_elements_x(&status_l, s_.type, &elements_x_l);
        same_int(elements_x_v, elements_x_l, "MPI_Get_elements_x" + what);
      }
      // The status Veneer fills must read the same to the library itself.
      count_v = -7;
      PMPI_Get_count(&status_v, s_.type, &count_v);
      same_int(count_v, count_l, "PMPI_Get_count of Veneer's status" + what);
    }
  }
  if (self) {
    int rc = MPI_Waitall(2, byte_requests, MPI_STATUSES_IGNORE);
    same_int(error_class(rc), MPI_SUCCESS, "byte Isend waitall");
  }
}

}  // namespace veneer::test::differential
