// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Reads an MPI datatype through MPI_Type_get_envelope/get_contents (PMPI_*)
// and reduces it to a Layout. Handles every MPI-3 combiner, and the MPI-4
// large-count (_c) constructors where the library has them; returns an error
// string for what it cannot describe exactly (the caller then passes through).
#include <mpi.h>

#include <optional>
#include <string>
#include <variant>

#include "datatypes/layout.h"

namespace veneer::datatypes {

struct DecodeError {
  std::string why;
};

std::variant<Layout, DecodeError> decode(MPI_Datatype type);

// The combiner of `type` (MPI_COMBINER_NAMED for a predefined type), or empty
// if the library fails the query. Asked in the large-count form where the
// library has it (VENEER_HAVE_LARGE_COUNT, a configure check): MPICH refuses
// the int form for a type built by an MPI-4 _c constructor, and under the
// default error handler that refusal aborts the job.
inline std::optional<int> combiner_of(MPI_Datatype type) {
  int combiner = MPI_COMBINER_NAMED;
#ifdef VENEER_HAVE_LARGE_COUNT
  MPI_Count ni = 0, na = 0, nc = 0, nt = 0;
  if (PMPI_Type_get_envelope_c(type, &ni, &na, &nc, &nt, &combiner) != MPI_SUCCESS) return std::nullopt;
#else
  int ni = 0, na = 0, nt = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nt, &combiner) != MPI_SUCCESS) return std::nullopt;
#endif
  return combiner;
}

}  // namespace veneer::datatypes
